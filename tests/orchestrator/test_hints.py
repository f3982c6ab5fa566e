"""What the asker adds to a question (``ask --hint``, a batch file's hint/evidence) reaches Batch 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.core.batch_io import read_hints, read_questions
from orchestrator.interfaces.cli.main import app
from tests.scripted_llm import scenarios as sc

runner = CliRunner()
HINT = "products are the rows of the products table"


def test_hints_are_read_from_a_csv_column_or_a_jsonl_key(tmp_path: Path) -> None:
    source = tmp_path / "q.csv"
    source.write_text(
        'question,evidence\nHow many products?,"items are products"\nTop customers,\n'
    )
    assert read_questions(source) == ["How many products?", "Top customers"]
    assert read_hints(source) == {"How many products?": "items are products"}
    lines = tmp_path / "q.jsonl"
    lines.write_text(
        '{"question": "How many products?", "hint": "items are products"}\n'
        '{"question": "Top customers", "evidence": "by revenue"}\n{"question": "Orders?"}\n'
    )
    assert read_hints(lines) == {"How many products?": "items are products",
                                 "Top customers": "by revenue"}  # fmt: skip
    plain = tmp_path / "q.txt"
    plain.write_text("How many products?\n")
    assert read_hints(plain) == {}
    no_column = tmp_path / "n.csv"
    no_column.write_text("question,notes\nHow many products?,x\n")
    assert read_hints(no_column) == {}


def _bodies(cassette: Any) -> list[str]:
    return [
        " ".join(m["content"] for m in json.loads(r.body)["messages"]) for r in cassette.requests
    ]


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch, model_endpoint: tuple[str, str]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    monkeypatch.setenv("SQLGATE_RATE_LIMIT", "1000/60")


@pytest.mark.vcr
def test_ask_hint_is_in_the_plans_prompt(demo_db: Path, model_env: None, vcr: Any) -> None:
    result = runner.invoke(
        app,
        ["ask", sc.PRODUCT_COUNT, "--db", f"sqlite:///{demo_db}", "--yes", "--hint", HINT],
    )
    assert result.exit_code == 0, result.output
    first = _bodies(vcr)[0]
    assert f"Hint from the asker: {HINT}" in first


@pytest.mark.vcr
def test_batch_file_hints_reach_their_questions_only(
    tmp_path: Path, demo_db: Path, model_env: None, vcr: Any
) -> None:
    source = tmp_path / "questions.csv"
    rows = [f'"{sc.PRODUCT_COUNT}","{HINT}"', f'"{sc.COUNT_QUESTIONS[0]}",']
    source.write_text("question,hint\n" + "\n".join(rows) + "\n")
    out = tmp_path / "results.jsonl"
    result = runner.invoke(
        app, ["batch", str(source), "--db", f"sqlite:///{demo_db}", "--out", str(out), "--yes"]
    )
    assert result.exit_code == 0, result.output
    first = _bodies(vcr)[0]
    assert first.count("Hint from the asker:") == 1
    assert f"Hint from the asker: {HINT}" in first
