"""``sqlgate batch``: every result written, one approval, and a re-run that finishes only the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.batch_io import ResultWriter, read_questions
from orchestrator.cli import app
from orchestrator.errors import ConfigurationError
from tests.orchestrator.conftest import requests_so_far
from tests.scripted_llm import scenarios as sc

runner = CliRunner()
QUESTIONS = sc.COUNT_QUESTIONS[:6] + [sc.AMBIGUOUS]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch, model_endpoint) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    monkeypatch.setenv("SQLGATE_RATE_LIMIT", "1000/60")


@pytest.mark.vcr
def test_batch_writes_every_result_then_a_rerun_finishes_only_the_rest(
    tmp_path: Path, demo_db: Path, model_env: None, vcr
) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("# analyst questions\n" + "\n".join(QUESTIONS) + "\n\n")
    out = tmp_path / "results.jsonl"
    args = [
        "batch",
        str(questions),
        "--db",
        f"sqlite:///{demo_db}",
        "--out",
        str(out),
        "--yes",
        "--k",
        "10",
    ]

    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    records = _lines(out)
    assert sorted(r["question"] for r in records) == sorted(QUESTIONS)
    assert {r["status"] for r in records} == {"answered", "needs_clarification"}
    assert requests_so_far(vcr) == 3  # B1, B2, B4 for all seven questions

    # An interruption mid-way: three results kept, the fourth cut short.
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])

    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert "3 already answered" in _flat(second.output)
    records = _lines(out)
    assert len(records) == 7 and sorted(r["question"] for r in records) == sorted(QUESTIONS)
    assert requests_so_far(vcr) == 6  # the second run asked only the four left

    third = runner.invoke(app, args)
    assert third.exit_code == 0 and "0 to go" in _flat(third.output)


def test_csv_in_and_out(tmp_path: Path) -> None:
    source = tmp_path / "q.csv"
    source.write_text('id,question\n1,"How many orders, by status?"\n2,Top customers\n')
    assert read_questions(source) == ["How many orders, by status?", "Top customers"]
    writer = ResultWriter(tmp_path / "r.csv")
    assert writer.resume() == {}


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("empty.txt", "\n# only a comment\n"),
        ("bad.jsonl", '{"q": 1}\n'),
        ("nocol.csv", "a,b\n1,2\n"),
    ],
)
def test_bad_question_files_are_refused_clearly(tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / name
    path.write_text(body)
    with pytest.raises(ConfigurationError):
        read_questions(path)


def test_bad_output_extension_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=".jsonl or .csv"):
        ResultWriter(tmp_path / "results.txt")
