"""``sqlgate batch``: every result written, one approval, and a re-run that finishes only the rest."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

import orchestrator.core.llm
from orchestrator.core.batch_io import ResultWriter, read_questions
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.result import BATCH_INCOMPLETE_EXIT
from orchestrator.interfaces.cli.main import app
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
    calls = sum(r["llm_calls"] for r in records)
    assert f"{calls} LLM call(s) in the records" in _flat(first.output)
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


def _batch(tmp_path: Path, demo_db: Path, questions: list[str]) -> tuple[list[str], Path]:
    source = tmp_path / "questions.txt"
    source.write_text("\n".join(questions) + "\n")
    out = tmp_path / "results.jsonl"
    return ["batch", str(source), "--db", f"sqlite:///{demo_db}", "--out", str(out), "--yes"], out


@pytest.mark.vcr
def test_a_cut_result_is_marked_and_the_summary_counts_what_the_records_say(
    tmp_path: Path, demo_db: Path, model_env: None
) -> None:
    args, out = _batch(tmp_path, demo_db, [sc.ORDERS_2025, sc.PRODUCT_COUNT])

    result = runner.invoke(app, args)

    assert result.exit_code == 0, result.output  # a cut result is still an answer
    records = {r["question"]: r for r in _lines(out)}
    cut, whole = records[sc.ORDERS_2025], records[sc.PRODUCT_COUNT]
    assert (cut["truncated"], cut["row_count"]) == (True, 1000)
    assert any(w.startswith("row_cap_hit:") for w in cut["warnings"])
    assert whole["truncated"] is False
    shown = _flat(result.output)
    assert "1 truncated" in shown
    calls = sum(r["llm_calls"] for r in records.values())
    assert f"{calls} LLM call(s) in the records" in shown


@pytest.mark.vcr
def test_a_failed_question_makes_the_batch_exit_13_and_a_rerun_says_so_again(
    tmp_path: Path, demo_db: Path, model_env: None
) -> None:
    args, out = _batch(tmp_path, demo_db, [sc.DELETE_CANCELLED, sc.PRODUCT_COUNT])

    first = runner.invoke(app, args)

    assert first.exit_code == BATCH_INCOMPLETE_EXIT == 13, first.output
    assert sorted(r["status"] for r in _lines(out)) == ["answered", "unsafe"]
    again = runner.invoke(app, args)  # nothing to ask; the file still holds a failure
    assert "0 to go" in _flat(again.output) and again.exit_code == 13


class _DeadModel(BaseHTTPRequestHandler):
    """An endpoint that is down: every request gets 503, with Retry-After: 0 to keep tests fast."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b'{"error": {"message": "upstream unavailable"}}'
        self.send_response(503)
        self.send_header("content-type", "application/json")
        self.send_header("retry-after", "0")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def dead_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DeadModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)  # a local fake only
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("SQLGATE_RATE_LIMIT", "1000/60")
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_dead_endpoint_is_told_as_it_happens_and_the_batch_exits_13(
    tmp_path: Path, demo_db: Path, dead_model: int
) -> None:
    args, out = _batch(tmp_path, demo_db, [sc.PRODUCT_COUNT, sc.ORDERS_2025])

    result = runner.invoke(app, args)

    assert result.exit_code == 13, result.output
    records = _lines(out)
    assert [r["status"] for r in records] == ["llm_error", "llm_error"]
    shown = _flat(result.output)
    # Without a terminal, each retry is a plain log line as it happens.
    # One call's 3 retries, then the batch stops: asking each question again alone would only
    # wait on the same dead endpoint.
    assert shown.count("model request failed (HTTP 503") == 3
    assert "attempt 2 of 4 in 0.0 s" in shown and "attempt 4 of 4" in shown
    calls = sum(r["llm_calls"] for r in records)
    assert f"{calls} LLM call(s) in the records" in shown and "2 llm_error" in shown


def test_on_a_terminal_retries_and_waits_share_one_live_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.console import Console

    from orchestrator.interfaces.cli import batch as cli_batch

    monkeypatch.setattr(cli_batch, "err", Console(file=io.StringIO(), force_terminal=True))
    with cli_batch.StageBars() as bars:
        bars("writing SQL", 0, 2)
        bars.notice("model request failed (HTTP 503); attempt 2 of 4 in 1.0 s")
        bars.limiter_wait(12.5)
        lines = [task.description for task in bars.progress.tasks]

    assert bars.live
    assert lines[0] == "writing SQL" and len(lines) == 2  # one bar, one line that is rewritten
    assert "rate limit reached: waiting 12.5 s" in lines[1]
