"""Exactly-once execution: the ledger, crashes of the worker (os._exit), audit replay, migrations."""

from __future__ import annotations

import multiprocessing
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from approval_fakes import Backend, ManualClock, fake_validate, item

from approvals import (
    AlreadyExecuted,
    ApprovalGate,
    Approve,
    Edit,
    ExecutionInDoubt,
    ExecutionLedger,
    ExpirySweeper,
    NotRunnable,
    Reject,
    SchemaVersionError,
    SqlApprovalStore,
    migrations,
    replay_audit,
    sql_store,
)


def decided(store, *decisions):
    """A resolved batch over three items: decisions are applied in order to items a, b, c."""
    gate = ApprovalGate(None, fake_validate, store=store, clock=ManualClock())
    items = [item(f"SELECT {n} LIMIT 1") for n in range(len(decisions))]
    batch = gate.open(items)
    outcome = gate.submit(
        batch.batch_id, {i.call_id: d for i, d in zip(items, decisions, strict=False)}
    )
    return gate, items, outcome


# -- the ledger -----------------------------------------------------------------------------


def test_each_approved_statement_runs_once(store):
    gate, (a, b, r), outcome = decided(store, Approve(), Edit(sql="SELECT 42"), Reject(reason="no"))
    ran = []
    for call_id in gate.ledger.remaining(outcome):
        with gate.ledger.executing(outcome, call_id) as claim:
            claim.sent()
            ran.append(claim.sql)
    assert ran == ["SELECT 0 LIMIT 1", "SELECT 42 LIMIT 100"]
    assert gate.ledger.remaining(outcome) == []
    with pytest.raises(AlreadyExecuted) as err:
        with gate.ledger.executing(outcome, a.call_id):
            pass  # pragma: no cover
    assert err.value.code == "already_executed"
    with pytest.raises(NotRunnable):
        with gate.ledger.executing(outcome, r.call_id):
            pass  # pragma: no cover
    assert store.execution(r.call_id) is None
    assert [(e.call_id, e.state) for e in store.executions(batch_id=outcome.batch_id)] == [
        (a.call_id, "done"),
        (b.call_id, "done"),
    ]


def test_a_failed_statement_is_settled_and_not_retried_silently(store):
    gate, (a,), outcome = decided(store, Approve())
    with pytest.raises(RuntimeError):
        with gate.ledger.executing(outcome, a.call_id):
            raise RuntimeError("statement timeout")
    entry = store.execution(a.call_id)
    assert (entry.state, entry.detail) == ("failed", "RuntimeError: statement timeout")
    with pytest.raises(AlreadyExecuted, match="already failed"):
        with gate.ledger.executing(outcome, a.call_id):
            pass  # pragma: no cover


def test_a_claim_sent_and_never_settled_is_in_doubt_on_recover(store):
    gate, (a, b), outcome = decided(store, Approve(), Approve())
    claimed = gate.ledger.executing(outcome, a.call_id)
    claimed.__enter__().sent()  # the worker "dies" here, the statement sent: the block never exits
    ledger = ExecutionLedger(store, ManualClock())
    (doubt,) = ledger.recover(run_id=outcome.run_id)
    assert (doubt.call_id, doubt.state) == (a.call_id, "in_doubt")
    assert ledger.recover(run_id=outcome.run_id) == []
    with pytest.raises(ExecutionInDoubt) as err:
        with ledger.executing(outcome, a.call_id):
            pass  # pragma: no cover
    assert err.value.code == "execution_in_doubt"
    assert ledger.remaining(outcome) == [b.call_id]


def test_a_claim_never_sent_is_released_on_recover_and_runs_once(store):
    gate, (a,), outcome = decided(store, Approve())
    stale = gate.ledger.executing(outcome, a.call_id).__enter__()  # dies before sending
    assert store.execution(a.call_id).state == "claimed"
    ledger = ExecutionLedger(store, ManualClock())
    assert ledger.recover(run_id=outcome.run_id) == []  # nothing in doubt: released
    assert store.execution(a.call_id) is None and ledger.remaining(outcome) == [a.call_id]
    with ledger.executing(outcome, a.call_id) as claim:
        claim.sent()
    # The first process, still alive after all, cannot send what was released and run again.
    with pytest.raises(AlreadyExecuted, match="released"):
        stale.sent()
    entry = store.execution(a.call_id)
    assert entry.state == "done" and entry.claim == claim.record.claim != stale.record.claim
    events = [e.event for e in store.audit_log(batch_id=outcome.batch_id) if e.call_id == a.call_id]
    assert events[-5:] == [
        "execution_claimed",
        "execution_released",
        "execution_claimed",
        "execution_sent",
        "execution_done",
    ]
    assert replay_audit(store.audit_log())[outcome.batch_id].executions == {a.call_id: "done"}


def test_a_claim_is_not_released_once_sent(store):
    gate, (a,), outcome = decided(store, Approve())
    claim = gate.ledger.executing(outcome, a.call_id).__enter__()
    claimed = store.execution(a.call_id)
    claim.sent()
    # A recovery that read the claim before it was sent cannot release it now.
    assert store.release_execution(claimed) is False
    assert store.execution(a.call_id).state == "sent"


def test_concurrent_executors_run_a_statement_once(backend):
    gate, (a,), outcome = decided(backend.open(), Approve())
    barrier, ran, refused = threading.Barrier(5), [], []

    def run():
        ledger = ExecutionLedger(backend.open() if backend.kind != "memory" else gate.store)
        barrier.wait()
        try:
            with ledger.executing(outcome, a.call_id) as claim:
                ran.append(claim.sql)
        except AlreadyExecuted:
            refused.append(1)

    threads = [threading.Thread(target=run) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(ran), len(refused)) == (1, 4)


# -- the audit log is the history -----------------------------------------------------------


def test_replaying_the_audit_log_reproduces_the_state(store):
    clock = ManualClock()
    gate = ApprovalGate(
        None, fake_validate, store=store, clock=clock, quorum=2, ttl=timedelta(seconds=30)
    )
    a, b, d = item(), item(), item("DROP TABLE t")
    resolved = gate.open([a, b, d])
    gate.submit(resolved.batch_id, {a.call_id: Approve(), b.call_id: Approve()}, actor="alice")
    gate.submit(
        resolved.batch_id, {a.call_id: Approve(), b.call_id: Reject(reason="slow")}, actor="bob"
    )
    expiring = gate.open([item()])
    still_pending = ApprovalGate(None, fake_validate, store=store, clock=clock).open([item()])
    clock.advance(31)
    ExpirySweeper(store, clock).sweep()
    outcome = gate.outcome(resolved.batch_id)
    with gate.ledger.executing(outcome, a.call_id):
        pass

    replayed = replay_audit(store.audit_log())
    assert set(replayed) == {r.batch_id for r in store.list_batches()}
    for record in store.list_batches():
        state = replayed[record.batch_id]
        assert state.status == record.status
        assert state.pending == record.batch.pending_ids
        assert state.voters == [v.actor for v in record.votes]
        if record.outcome is not None:
            assert state.decided_by == record.outcome.decided_by
            assert state.items == {
                cid: (r.status, r.sql_hash, r.reason)
                for cid, r in record.outcome.resolutions.items()
            }
        assert state.executions == {
            e.call_id: e.state for e in store.executions(batch_id=record.batch_id)
        }
    assert replayed[expiring.batch_id].status == "expired"
    assert replayed[still_pending.batch_id].status == "pending"
    assert replayed[resolved.batch_id].executions == {a.call_id: "done"}


# -- crashes: the worker killed with os._exit, a fresh process finishes ---------------------


def _crashing_worker(backend: Backend, run_id: str, crash_at: str, side_effects: str) -> None:
    store = backend.open()
    gate = ApprovalGate(None, fake_validate, store=store, run_id=run_id)
    items = [item(f"SELECT {n} LIMIT 1", question_id=f"q{n}") for n in range(3)]
    batch = gate.open(items)
    if crash_at == "after_pause":
        os._exit(0)
    outcome = gate.submit(
        batch.batch_id, {i.call_id: Approve() for i in items}, actor="alice", idempotency_key="k"
    )
    if crash_at == "after_decision":
        os._exit(0)
    for call_id in gate.ledger.remaining(outcome):
        with gate.ledger.executing(outcome, call_id) as claim:
            if crash_at == "claimed_not_sent" and call_id == outcome.runnable_ids[1]:
                os._exit(0)  # claimed, killed before the statement went anywhere
            claim.sent()
            with open(side_effects, "a") as log:
                log.write(f"{call_id}\t{claim.sql}\n")
            if crash_at == "between_statements" and call_id == outcome.runnable_ids[1]:
                os._exit(0)  # ran, but the settlement never reached the store
    os._exit(0)


def _finish_in_a_fresh_process(backend: Backend, run_id: str, side_effects: str, report) -> None:
    try:
        report.put(_finish(backend, run_id, side_effects))
    except Exception as exc:  # pragma: no cover - surfaced by the test
        report.put(exc)


def _finish(backend: Backend, run_id: str, side_effects: str):
    store = backend.open()
    gate = ApprovalGate(None, fake_validate, store=store, run_id=run_id)
    (record,) = store.list_batches(run_id=run_id)
    if record.status == "pending":
        decisions = {cid: Approve() for cid in record.batch.pending_ids}
        gate.submit(record.batch_id, decisions, actor="alice", idempotency_key="k")
    outcome = gate.outcome(record.batch_id)
    doubts = [d.call_id for d in gate.ledger.recover(run_id=run_id)]
    for call_id in gate.ledger.remaining(outcome):
        with gate.ledger.executing(outcome, call_id) as claim:
            claim.sent()
            with open(side_effects, "a") as log:
                log.write(f"{call_id}\t{claim.sql}\n")
    store.close()
    return outcome.runnable_ids, doubts


@pytest.mark.parametrize(
    "crash_at", ["after_pause", "after_decision", "claimed_not_sent", "between_statements"]
)
def test_a_killed_worker_is_finished_by_a_fresh_process(backend, crash_at, tmp_path):
    if backend.kind == "memory":
        pytest.skip("a memory store does not outlive its process")
    backend.open()  # schema in place before the fork
    for opened in backend.opened:
        opened.engine.dispose()
    ctx = multiprocessing.get_context("fork")
    side_effects = str(tmp_path / "side_effects.tsv")
    clean = Backend(backend.kind, backend.url, backend.schema)
    worker = ctx.Process(target=_crashing_worker, args=(clean, "run_crash", crash_at, side_effects))
    worker.start()
    worker.join(60)
    assert worker.exitcode == 0
    report = ctx.Queue()
    fresh = ctx.Process(
        target=_finish_in_a_fresh_process, args=(clean, "run_crash", side_effects, report)
    )
    fresh.start()
    finished = report.get(timeout=30)
    fresh.join(30)
    assert not isinstance(finished, Exception), finished
    runnable, doubts = finished

    lines = Path(side_effects).read_text().splitlines()
    executed = [line.split("\t")[0] for line in lines]
    assert len(executed) == len(set(executed)), "a call_id executed twice"
    if crash_at == "between_statements":
        assert doubts == [runnable[1]]
        assert executed == runnable  # the in-doubt one ran once, before the crash, and never again
    elif crash_at == "claimed_not_sent":
        assert doubts == []  # never sent: released, and run once by the fresh process
        assert executed == runnable
    else:
        assert doubts == []
        assert executed == runnable
    store = clean.open()
    states = {e.call_id: e.state for e in store.executions(run_id="run_crash")}
    expected = {cid: "done" for cid in runnable}
    if crash_at == "between_statements":
        expected[runnable[1]] = "in_doubt"
    assert states == expected


# -- schema versions (SQL stores) -----------------------------------------------------------


def test_a_version_1_store_is_migrated_to_the_latest(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = sa.create_engine(url)
    a = item()
    legacy = ApprovalGate(None, fake_validate, clock=ManualClock())
    batch = legacy.open([a])
    with engine.begin() as conn:
        sql_store.schema_versions.create(conn)
        sql_store._v1(conn)
        conn.execute(
            sa.insert(sql_store.schema_versions).values(version=1, applied_at="2026-01-01")
        )
        v1_batches = sql_store._batches_table(sa.MetaData(), with_votes=False)
        conn.execute(
            sa.insert(v1_batches).values(
                batch_id=batch.batch_id,
                run_id=batch.run_id,
                cycle=1,
                status="pending",
                version=1,
                created_at="2026-01-01T00:00:00.000000+00:00",
                batch=batch.model_dump_json(),
            )
        )
    engine.dispose()
    store = SqlApprovalStore(url)
    store.setup()
    store.setup()
    assert store.schema_version() == len(sql_store.MIGRATIONS)
    assert store.get_batch(batch.batch_id).votes == []
    (summary,) = store.list_summaries()
    assert (summary.batch_id, summary.pending, summary.votes, summary.quorum) == (
        batch.batch_id,
        1,
        0,
        1,
    )
    assert summary.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    gate = ApprovalGate(None, fake_validate, store=store)
    assert gate.submit(batch.batch_id, {a.call_id: Approve()}).runnable(a.call_id) == a.sql
    store.close()


def test_a_newer_store_is_refused(tmp_path):
    store = SqlApprovalStore(f"sqlite:///{tmp_path / 'new.sqlite3'}")
    store.setup()
    with store.engine.begin() as conn:
        conn.execute(sa.update(migrations.schema_versions).values(version=99))
    with pytest.raises(SchemaVersionError) as err:
        store.setup()
    assert err.value.code == "schema_version_newer"
    store.close()


def test_default_url_is_a_local_sqlite_file(monkeypatch):
    monkeypatch.delenv("SQLGATE_APPROVALS_URL", raising=False)
    assert sql_store.default_store_url() == "sqlite:///.sqlgate/approvals.sqlite3"
    monkeypatch.setenv("SQLGATE_APPROVALS_URL", "postgresql+psycopg://u@h/db")
    assert sql_store.default_store_url() == "postgresql+psycopg://u@h/db"
