"""A run paused at the gate: decided from elsewhere, resumed by a fresh pipeline, exactly once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from approvals import ApprovalGate, Approve, Reject, SqlApprovalStore
from approvals.models import ExecutionRecord
from orchestrator.core.errors import RunConflict
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from tests.orchestrator.conftest import Harness, requests_so_far
from tests.scripted_llm import scenarios as sc


def _stores(tmp_path: Path) -> tuple[SqlApprovalStore, RunStore]:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    return SqlApprovalStore(url), RunStore(url)


def _paused(harness: Harness, demo_url: str, tmp_path: Path, question: str):
    approvals, runs = _stores(tmp_path)
    database_pipeline = harness.pipeline(demo_url, None, stores=(approvals, runs))
    return database_pipeline.ask(question)


def _decide(tmp_path: Path, decide) -> str:
    """A reviewer elsewhere: its own store objects on the same state database."""
    approvals, _ = _stores(tmp_path)
    [record] = approvals.pending_batches()
    gate = ApprovalGate(reviewer=None, validate=lambda sql: _Accepted(sql), store=approvals)
    gate.submit(
        record.batch_id, {item.call_id: decide for item in record.batch.pending}, actor="alice"
    )
    return record.batch_id


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


@pytest.mark.vcr
def test_a_paused_run_is_decided_elsewhere_and_resumed_by_a_fresh_pipeline(
    harness: Harness, demo_url: str, tmp_path: Path, vcr
) -> None:
    paused = _paused(harness, demo_url, tmp_path, sc.PRODUCT_COUNT)
    assert paused.status == RunStatus.AWAITING_APPROVAL and paused.exit_code == 11
    assert paused.llm_calls == 2 and "SQLExecutor" not in paused.agents_ran()
    assert requests_so_far(vcr) == 2

    fresh = harness.pipeline(demo_url, None, stores=_stores(tmp_path))
    [still] = fresh.resume(paused.run_id)  # nothing decided yet: nothing happens
    assert still.status == RunStatus.AWAITING_APPROVAL and requests_so_far(vcr) == 2

    _decide(tmp_path, Approve())
    [done] = harness.pipeline(demo_url, None, stores=_stores(tmp_path)).resume(paused.run_id)
    assert done.status == RunStatus.ANSWERED, done.error
    assert done.llm_calls == 3 and requests_so_far(vcr) == 3
    assert done.row_count == 8 and "SQLExecutor" in done.agents_ran()
    assert done.approvals[0].status == "approved"

    [again] = harness.pipeline(demo_url, None, stores=_stores(tmp_path)).resume(paused.run_id)
    assert again == done  # the stored result; nothing ran twice
    approvals, _ = _stores(tmp_path)
    assert [e.state for e in approvals.executions(run_id=paused.run_id)] == ["done"]


@pytest.mark.vcr
def test_a_rejection_decided_elsewhere_reaches_the_answer(
    harness: Harness, demo_url: str, tmp_path: Path, vcr
) -> None:
    paused = _paused(harness, demo_url, tmp_path, sc.TOP_CATEGORIES)
    _decide(tmp_path, Reject(reason="revenue must exclude returns"))

    [done] = harness.pipeline(demo_url, None, stores=_stores(tmp_path)).resume(paused.run_id)

    assert done.status == RunStatus.REJECTED
    assert "revenue must exclude returns" in done.answer
    assert done.error.code == "rejected_by_reviewer"
    approvals, _ = _stores(tmp_path)
    assert approvals.executions(run_id=paused.run_id) == []


@pytest.mark.vcr
def test_two_processes_resuming_at_once_one_wins(
    harness: Harness, demo_url: str, tmp_path: Path, vcr
) -> None:
    paused = _paused(harness, demo_url, tmp_path, sc.PRODUCT_COUNT)
    _decide(tmp_path, Approve())
    pipelines = [harness.pipeline(demo_url, None, stores=_stores(tmp_path)) for _ in range(2)]
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def resume(pipeline) -> None:
        barrier.wait()
        try:
            outcomes.append(pipeline.resume(paused.run_id)[0].status)
        except RunConflict as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=resume, args=(p,)) for p in pipelines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(map(str, outcomes)) == sorted([str(RunStatus.ANSWERED), "run_conflict"])
    approvals, _ = _stores(tmp_path)
    assert len(approvals.executions(run_id=paused.run_id)) == 1


@pytest.mark.vcr
def test_a_statement_whose_execution_was_cut_short_is_in_doubt_not_rerun(
    harness: Harness, demo_url: str, tmp_path: Path, vcr
) -> None:
    paused = _paused(harness, demo_url, tmp_path, sc.PRODUCT_COUNT)
    _decide(tmp_path, Approve())
    approvals, _ = _stores(tmp_path)
    [record] = approvals.list_batches(run_id=paused.run_id)
    [call_id] = record.outcome.runnable_ids
    # A worker claimed the statement and died before recording how it ended.
    approvals.claim_execution(
        ExecutionRecord(
            call_id=call_id,
            batch_id=record.batch_id,
            run_id=paused.run_id,
            sql_hash=record.outcome.resolutions[call_id].sql_hash,
            state="started",
            actor="worker-1",
            started_at=datetime.now(UTC),
        )
    )

    [done] = harness.pipeline(demo_url, None, stores=_stores(tmp_path)).resume(paused.run_id)

    assert done.status == RunStatus.EXECUTION_IN_DOUBT and done.exit_code == 12
    assert done.error.code == "execution_in_doubt"
    assert [e.state for e in approvals.executions(run_id=paused.run_id)] == ["in_doubt"]
    assert requests_so_far(vcr) == 2  # no answer was written from a result nobody has


@pytest.mark.vcr("test_a_paused_run_is_decided_elsewhere_and_resumed_by_a_fresh_pipeline.yaml")
def test_a_statement_claimed_but_never_sent_runs_once_on_resume(
    harness: Harness, demo_url: str, tmp_path: Path, vcr
) -> None:
    paused = _paused(harness, demo_url, tmp_path, sc.PRODUCT_COUNT)
    _decide(tmp_path, Approve())
    approvals, _ = _stores(tmp_path)
    [record] = approvals.list_batches(run_id=paused.run_id)
    [call_id] = record.outcome.runnable_ids
    # A worker claimed the statement and died before it was sent to the database.
    approvals.claim_execution(
        ExecutionRecord(
            call_id=call_id,
            batch_id=record.batch_id,
            run_id=paused.run_id,
            sql_hash=record.outcome.resolutions[call_id].sql_hash,
            state="claimed",
            actor="worker-1",
            started_at=datetime.now(UTC),
            claim="token-of-worker-1",
        )
    )

    [done] = harness.pipeline(demo_url, None, stores=_stores(tmp_path)).resume(paused.run_id)

    assert done.status == RunStatus.ANSWERED and done.row_count == 8, done.error
    [entry] = approvals.executions(run_id=paused.run_id)
    assert entry.state == "done" and entry.claim != "token-of-worker-1"
    events = [e.event for e in approvals.audit_log(run_id=paused.run_id) if e.call_id == call_id]
    assert events[-4:] == [
        "execution_released",
        "execution_claimed",
        "execution_sent",
        "execution_done",
    ]
    assert requests_so_far(vcr) == 3


def test_a_pipeline_without_a_reviewer_needs_somewhere_to_wait() -> None:
    with pytest.raises(ValueError, match="pauses at the gate"):
        from orchestrator.core.pipeline import Pipeline

        Pipeline(None, None, None)  # type: ignore[arg-type]


def test_resuming_an_unknown_run_says_so(tmp_path: Path) -> None:
    from orchestrator.core.errors import RunNotFound

    with pytest.raises(RunNotFound):
        _stores(tmp_path)[1].load("run_nope")
