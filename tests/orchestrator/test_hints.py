"""What the asker adds to a question (``ask --hint``, a batch file's hint/evidence) reaches Batch 1,
and is recorded with the run: a queued, taken-over or worker-run run plans with it too."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from approvals import SqlApprovalStore
from orchestrator.core.batch_io import read_hints, read_questions
from orchestrator.core.checkpoint import PausedCheckpoint, StartedCheckpoint, load_checkpoint
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from orchestrator.interfaces.cli.main import app
from orchestrator.wiring import state_database
from tests.orchestrator.conftest import Harness
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
def test_a_clarification_follow_up_plans_with_the_askers_hint(
    demo_db: Path, model_env: None, vcr: Any
) -> None:
    result = runner.invoke(
        app,
        [
            "ask", sc.AMBIGUOUS, "--db", f"sqlite:///{demo_db}", "--yes", "--json",
            "--hint", HINT, "--answer", "metric=revenue", "--answer", "entity=products",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["follow_up_of"]
    asked, follow_up = _bodies(vcr)[:2]
    assert f"Hint from the asker: {HINT}" in asked
    assert "The analyst's answers" in follow_up and f"Hint from the asker: {HINT}" in follow_up


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


def _stores(tmp_path: Path) -> tuple[SqlApprovalStore, RunStore]:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    return SqlApprovalStore(url), RunStore(url)


def test_a_checkpoint_written_before_hints_were_kept_loads_with_none() -> None:
    started = load_checkpoint({"kind": "started", "version": 2, "run_id": "r", "questions": ["q"]})
    assert isinstance(started, StartedCheckpoint) and started.hints is None
    paused = load_checkpoint(
        {"run_id": "r", "dialect": "sqlite", "calls_made": 1, "cycle": 1, "batch_id": "b",
         "pending": {}, "questions": [{"qid": "q1", "text": "How many?"}]}
    )  # fmt: skip
    assert isinstance(paused, PausedCheckpoint) and paused.questions[0].hint == ""


@pytest.mark.vcr
def test_a_queued_run_plans_with_the_hints_it_was_queued_with(
    harness: Harness, demo_url: str, tmp_path: Path, vcr: Any
) -> None:
    harness.pipeline(demo_url, None, stores=_stores(tmp_path)).queue(
        "run_hinted", [sc.PRODUCT_COUNT], hints=[f"  {HINT} "]
    )
    # The service (or a worker) starts it from its record: the caller's hint is not given again.
    fresh = harness.pipeline(demo_url, None, stores=_stores(tmp_path))
    [paused] = fresh.run_batch([sc.PRODUCT_COUNT], run_id="run_hinted")

    assert paused.status == RunStatus.AWAITING_APPROVAL
    assert f"Hint from the asker: {HINT}" in _bodies(vcr)[0]
    _, runs = _stores(tmp_path)
    checkpoint = runs.load("run_hinted").checkpoint
    assert isinstance(checkpoint, PausedCheckpoint) and checkpoint.questions[0].hint == HINT


@pytest.mark.vcr
def test_a_run_taken_over_before_the_gate_plans_with_its_hints(
    harness: Harness, demo_url: str, tmp_path: Path, vcr: Any
) -> None:
    harness.pipeline(demo_url, None, stores=_stores(tmp_path)).queue(
        "run_stopped", [sc.PRODUCT_COUNT, sc.COUNT_QUESTIONS[0]], hints=[HINT]
    )
    _, runs = _stores(tmp_path)
    recorded = runs.load("run_stopped").checkpoint
    assert isinstance(recorded, StartedCheckpoint) and recorded.hints == [HINT, ""]

    harness.pipeline(demo_url, None, stores=_stores(tmp_path)).recover("run_stopped")

    first = _bodies(vcr)[0]
    assert first.count("Hint from the asker:") == 1 and f"Hint from the asker: {HINT}" in first


@pytest.mark.vcr
def test_a_deferred_run_keeps_its_hint_across_the_pause(
    harness: Harness, demo_url: str, tmp_path: Path, vcr: Any
) -> None:
    paused = harness.pipeline(demo_url, None, stores=_stores(tmp_path)).ask(
        sc.PRODUCT_COUNT, hint=HINT
    )
    _, runs = _stores(tmp_path)
    checkpoint = runs.load(paused.run_id).checkpoint
    assert isinstance(checkpoint, PausedCheckpoint) and checkpoint.questions[0].hint == HINT
    restored = QuestionState.from_checkpoint(paused.run_id, checkpoint.questions[0], time.time)
    assert restored.hint == HINT  # what a resume or a takeover carries on with


def _hinted_batch(url: str) -> tuple[str, str]:
    """A distributed batch of two runs recorded in the state at ``url``: the first with a hint
    on its first question, the second with none. Their run ids."""
    from orchestrator.core.run_identity import DatabaseLogin

    state = state_database(url)
    state.setup()
    recorded = state.batches.record(
        "batch_hinted",
        "sqlite:///shop.db",
        [["How many products?", "Top customers"], ["Orders?"]],
        options={},
        login=DatabaseLogin(""),
        hints={"How many products?": HINT},
    )
    state.close()
    hinted, plain = (run.run_id for run in recorded.runs)
    return hinted, plain


def test_a_distributed_batch_records_each_questions_hint_with_its_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    hinted, plain = _hinted_batch(url)
    runs = RunStore(url)
    first, second = runs.load(hinted).checkpoint, runs.load(plain).checkpoint
    assert isinstance(first, StartedCheckpoint) and first.hints == [HINT, ""]
    assert isinstance(second, StartedCheckpoint) and second.hints is None


def test_runs_show_says_what_the_asker_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    hinted, plain = _hinted_batch(url)
    monkeypatch.setenv("SQLGATE_STATE_URL", url)
    shown = runner.invoke(app, ["runs", "show", hinted, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["hints"] == [HINT, ""]
    unhinted = runner.invoke(app, ["runs", "show", plain, "--json"])
    assert "hints" not in json.loads(unhinted.output)
    screen = runner.invoke(app, ["runs", "show", hinted])
    assert "hints" in screen.output and "products table" in screen.output
