"""Separation of duties: the author of SQL never vouches for it, and under
``[approvals] four_eyes = true`` never decides it.

The author is who asked for the run (a terminal's proven name, a token's actor, an agent's
``submit_sql``) and a reviewer whose edit re-opened the batch. The scenarios as a user runs them:
a run asked as alice pauses at the gate; alice decides it with ``sqlgate approvals decide``
(refused under four_eyes, with one sentence; not evidence for earned trust without it); bob
decides it. An in-process reviewer (a terminal prompt, ``--yes``) is the asker. SQLite and
PostgreSQL state.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from approvals import ApprovalGate, ApproveAll, AuthorMayNotDecide, SqlApprovalStore
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.result import RunStatus
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import memory_for
from orchestrator.interfaces.cli.main import app
from orchestrator.wiring import run_hooks
from ratelimit import SlidingWindowLimiter
from safety import Policy
from tests.conftest import as_reviewer

runner = CliRunner()

FOUR_EYES = "[approvals]\nfour_eyes = true\n"
COUNT = "SELECT count(*) AS n FROM regions"


def _llm() -> LLMClient:
    return LLMClient(
        LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=5, window=60.0, mode="fail_fast"),
        http_client=httpx2.Client(transport=CassetteTransport([])),
    )


@pytest.fixture(params=["sqlite", "postgres"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    return request.getfixturevalue("postgres_database")


def _paused(demo_db: Path, state_url: str, policy: str, asker: str) -> tuple[str, str, str]:
    """(run id, batch id, call id) of a run asked by ``asker``, paused at the gate."""
    state = StateDatabase(state_url)
    database = TargetDatabase(f"sqlite:///{demo_db}", policy=Policy.from_toml_text(policy))
    pipeline = Pipeline(
        database,
        _llm(),
        None,
        approval_store=state.approvals,
        run_store=state.runs,
        hooks=run_hooks(memory_for(state, database)),
        asker=lambda _run_id: asker,
    )
    [paused] = pipeline.run_batch(["how many regions?"], statements=[COUNT])
    assert paused.status == RunStatus.AWAITING_APPROVAL
    [record] = state.approvals.pending_batches(run_id=paused.run_id)
    assert record.batch.authors == [asker]
    assert record.batch.four_eyes is ("four_eyes" in policy)
    return paused.run_id, record.batch_id, record.batch.pending_ids[0]


def _decide(batch_id: str, decisions: Path, db: str, code: int) -> dict:
    result = runner.invoke(
        app, ["approvals", "decide", batch_id, "--file", str(decisions), "--db", db, "--json"]
    )
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.mark.vcr  # no interaction recorded: a model request would fail the test
def test_under_four_eyes_the_asker_cannot_decide_their_own_batch(
    demo_db: Path, tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    db = f"sqlite:///{demo_db}"
    run_id, batch_id, call_id = _paused(demo_db, state_url, FOUR_EYES, "alice")
    decisions = tmp_path / "decisions.json"
    decisions.write_text(json.dumps({call_id: "approve"}))

    as_reviewer(monkeypatch, "alice")
    refused = _decide(batch_id, decisions, db, code=1)
    assert refused["error"]["code"] == "author_may_not_decide"
    message = refused["error"]["message"]
    assert "alice" in message and "four_eyes" in message and message.count(". ") == 0
    store = SqlApprovalStore(state_url)
    record = store.get_batch(batch_id)
    assert record.status == "pending" and record.votes == []  # nothing was recorded

    as_reviewer(monkeypatch, "bob")
    decided = _decide(batch_id, decisions, db, code=0)
    assert decided["status"] == "resolved"
    store.close()


@pytest.mark.vcr
def test_the_askers_own_approval_is_no_evidence_for_earned_trust(
    demo_db: Path, tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    db = f"sqlite:///{demo_db}"
    run_id, batch_id, call_id = _paused(demo_db, state_url, "", "alice")
    decisions = tmp_path / "decisions.json"
    decisions.write_text(json.dumps({call_id: "approve"}))
    as_reviewer(monkeypatch, "alice")  # without four_eyes alice may decide her own batch ...
    assert _decide(batch_id, decisions, db, code=0)["status"] == "resolved"
    done = runner.invoke(app, ["resume", run_id, "--db", db, "--json"])
    assert done.exit_code == 0, done.output

    # ... but memory keeps the statement with no reviewer: it vouches for nothing
    state = StateDatabase(state_url)
    [example] = state.memory.examples()
    assert example.status == "approved" and example.reviewers == []


def test_an_in_process_reviewer_is_the_asker(demo_db: Path) -> None:
    """``--yes`` (and a terminal prompt) decide in the asker's own command: under four_eyes the
    run is not decided there, and it says why."""
    pipeline = Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}", policy=Policy.from_toml_text(FOUR_EYES)),
        _llm(),
        ApproveAll(),
        config=None,
        asker=lambda _run_id: "alice",
    )
    [result] = pipeline.run_batch(["how many regions?"], statements=[COUNT])
    assert result.status is RunStatus.CANCELLED and result.row_count is None
    assert result.error is not None and "four_eyes" in result.error.message


def test_an_editor_under_four_eyes_needs_another_reviewer(demo_db: Path, state_url: str) -> None:
    """A reviewer who edits becomes an author: the batch re-opens for another reviewer, and the
    editor cannot approve it again."""
    _, batch_id, call_id = _paused(demo_db, state_url, FOUR_EYES, "alice")
    store = SqlApprovalStore(state_url)
    gate = ApprovalGate(
        None,
        TargetDatabase(f"sqlite:///{demo_db}").validator().validate,
        store=store,
    )
    edit = {"action": "edit", "sql": "SELECT count(*) AS n FROM customers"}
    pending = gate.submit(batch_id, {call_id: edit}, actor="bob")
    assert (pending.status, pending.votes, pending.quorum) == ("pending", 1, 2)
    record = store.get_batch(batch_id)
    assert record.batch.authors == ["alice", "bob"]
    with pytest.raises(AuthorMayNotDecide):
        gate.submit(batch_id, {call_id: "approve"}, actor="alice")
    done = gate.submit(batch_id, {call_id: "approve"}, actor="carol")
    assert done.status == "resolved" and done.resolutions[call_id].status == "edited"
    store.close()
