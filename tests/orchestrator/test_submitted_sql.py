"""A caller's own SQL (``statements``): the same validator and gate, and never a model call, even
when the run is taken over from its queue by another process or its statement fails."""

from __future__ import annotations

from pathlib import Path

import httpx2

from approvals import ApprovalGate, SqlApprovalStore
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from ratelimit import SlidingWindowLimiter
from safety import SqlValidator

PURPOSE = "SQL written by alice (agent), purpose: the category names"


def pipeline(demo_db: Path, state: Path) -> Pipeline:
    """A pipeline pausing at the gate, whose model has no reply to give (a call would fail)."""
    url = f"sqlite:///{state}"
    llm = LLMClient(
        LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=5, window=60.0, mode="fail_fast"),
        http_client=httpx2.Client(transport=CassetteTransport([])),
    )
    return Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}"),
        llm,
        None,
        approval_store=SqlApprovalStore(url),
        run_store=RunStore(url),
    )


def test_a_queued_submitted_run_is_taken_over_and_answered_without_a_model(
    demo_db: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.sqlite"
    pipeline(demo_db, state).queue(
        "run_submitted", [PURPOSE], statements=["SELECT name FROM categories ORDER BY name"]
    )

    [paused] = pipeline(demo_db, state).recover("run_submitted")  # another process takes it

    assert paused.status == RunStatus.AWAITING_APPROVAL
    assert paused.llm_calls == 0 and paused.http_requests == 0
    approvals = SqlApprovalStore(f"sqlite:///{state}")
    [record] = approvals.pending_batches(run_id="run_submitted")
    [item] = record.batch.pending
    assert item.question == PURPOSE
    assert item.sql == "SELECT name FROM categories ORDER BY name LIMIT 1001"
    ApprovalGate(
        reviewer=None, validate=SqlValidator(dialect="sqlite").validate, store=approvals
    ).submit(record.batch_id, {item.call_id: "approve"}, actor="rita")

    [answered] = pipeline(demo_db, state).resume("run_submitted")

    assert answered.status == RunStatus.ANSWERED
    assert answered.llm_calls == 0 and answered.http_requests == 0
    assert answered.row_count == 8 and answered.columns == ["name"]
    assert "Row count: 8" in (answered.answer or "")
    assert answered.approvals[0].status == "approved"


def test_a_submitted_statement_that_fails_is_not_corrected_by_a_model(
    demo_db: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.sqlite"
    overflow = "SELECT abs(-9223372036854775808) AS n FROM categories"  # SQLite: integer overflow
    [paused] = pipeline(demo_db, state).run_batch([PURPOSE], statements=[overflow])
    approvals = SqlApprovalStore(f"sqlite:///{state}")
    [record] = approvals.pending_batches(run_id=paused.run_id)
    ApprovalGate(
        reviewer=None, validate=SqlValidator(dialect="sqlite").validate, store=approvals
    ).submit(record.batch_id, {c: "approve" for c in record.batch.pending_ids}, actor="rita")

    [failed] = pipeline(demo_db, state).resume(paused.run_id)

    assert failed.status == RunStatus.EXECUTION_FAILED
    assert failed.corrections == 0 and failed.llm_calls == 0
    assert failed.error is not None and "overflow" in failed.error.message.lower()
