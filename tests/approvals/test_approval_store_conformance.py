"""One conformance suite for every approval store: memory, SQLite file, PostgreSQL (when its URL is set).

Every test takes ``backend`` (a ``Backend``): ``backend.open()`` gives a store on the same
state, as another process would; SQL backends also run the multi-process race.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import threading
import uuid
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from approval_fakes import Backend, StepClock, fake_validate, item

from approvals import (
    AlreadyExecuted,
    ApprovalBatch,
    ApprovalGate,
    ApprovalOutcome,
    ApprovalStore,
    Approve,
    ApproveAll,
    AuditEvent,
    BatchNotFound,
    BatchSummary,
    CallLocation,
    DecisionConflict,
    DecisionError,
    Edit,
    IdempotencyConflict,
    ItemCategory,
    Reject,
)


def batch_of(*items, run_id="run_a", cycle=1, pending=True) -> ApprovalBatch:
    category = ItemCategory.NEEDS_APPROVAL if pending else ItemCategory.DENIED
    return ApprovalBatch(
        batch_id=f"batch_{uuid.uuid4().hex}",
        run_id=run_id,
        cycle=cycle,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        items=list(items),
        categories={i.call_id: category for i in items},
    )


def event(batch: ApprovalBatch, name: str, **detail) -> AuditEvent:
    return AuditEvent(
        at=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
        run_id=batch.run_id,
        batch_id=batch.batch_id,
        event=name,
        actor="tester",
        detail=detail,
    )


def outcome_of(batch: ApprovalBatch, actor="tester") -> ApprovalOutcome:
    return ApprovalOutcome(
        batch_id=batch.batch_id,
        run_id=batch.run_id,
        cycle=batch.cycle,
        resolutions={},
        decided_by=actor,
    )


def state_hash(store: ApprovalStore) -> str:
    parts = [r.model_dump_json() for r in store.list_batches()] + [
        e.model_dump_json() for e in store.audit_log()
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# -- storage primitives ---------------------------------------------------------------------


def test_setup_is_idempotent(store):
    store.setup()
    store.setup()
    assert store.list_batches() == []


def test_create_and_get_round_trip(store, backend):
    batch = batch_of(
        item(findings=[{"code": "limit_added", "message": "m", "severity": "rewrite"}]), item()
    )
    created = store.create_batch(batch, [event(batch, "batch_opened")])
    assert (created.status, created.version, created.outcome) == ("pending", 1, None)
    assert store.get_batch(batch.batch_id) == created
    assert backend.open().get_batch(batch.batch_id) == created


def test_unknown_batch(store):
    with pytest.raises(BatchNotFound) as err:
        store.get_batch("batch_nope")
    assert err.value.code == "batch_not_found"


def test_batch_and_call_ids_are_never_reused(store):
    a = item()
    batch = batch_of(a)
    store.create_batch(batch)
    with pytest.raises(ValueError):
        store.create_batch(batch)
    with pytest.raises(ValueError):
        store.create_batch(batch_of(a))
    assert len(store.list_batches()) == 1


def test_list_filters_in_creation_order(store):
    b1, b2, b3 = batch_of(item()), batch_of(item(), run_id="run_b"), batch_of(item(), cycle=2)
    for b in (b1, b2, b3):
        store.create_batch(b)
    store.resolve(b1.batch_id, expected_version=1, outcome=outcome_of(b1))
    assert [r.batch_id for r in store.list_batches()] == [b1.batch_id, b2.batch_id, b3.batch_id]
    assert [r.batch_id for r in store.pending_batches()] == [b2.batch_id, b3.batch_id]
    assert [r.batch_id for r in store.list_batches(run_id="run_a")] == [b1.batch_id, b3.batch_id]
    assert [r.batch_id for r in store.list_batches(status="resolved")] == [b1.batch_id]
    assert [r.batch_id for r in store.pending_batches(limit=1)] == [b2.batch_id]
    assert (store.last_cycle("run_a"), store.last_cycle("run_b"), store.last_cycle("run_none")) == (
        2,
        1,
        0,
    )
    summaries = store.list_summaries()
    assert summaries == [BatchSummary.of(store.get_batch(b.batch_id)) for b in (b2, b3)]
    assert summaries[0].created_at == datetime(2026, 1, 1, tzinfo=UTC) and summaries[0].pending == 1
    assert [s.batch_id for s in store.list_summaries(status=None, run_id="run_a", limit=1)] == [
        b1.batch_id
    ]


def test_locate_call(store):
    a = item()
    batch = batch_of(a, cycle=3)
    store.create_batch(batch)
    assert store.locate_call(a.call_id) == CallLocation(batch.batch_id, "run_a", 3)
    assert store.locate_call("call_none") is None


# -- the conditional update -----------------------------------------------------------------


def test_resolve_is_a_compare_and_set(store, backend):
    batch = batch_of(item())
    store.create_batch(batch, [event(batch, "batch_opened")])
    before = state_hash(store)
    with pytest.raises(DecisionConflict):
        store.resolve(
            batch.batch_id,
            expected_version=7,
            outcome=outcome_of(batch),
            events=[event(batch, "x")],
        )
    assert state_hash(store) == before

    won = store.resolve(
        batch.batch_id,
        expected_version=1,
        outcome=outcome_of(batch, "alice"),
        events=[event(batch, "batch_resolved")],
        idempotency_key="k1",
        decision_digest="d1",
    )
    assert (won.status, won.version, won.outcome.decided_by) == ("resolved", 2, "alice")
    assert backend.open().get_batch(batch.batch_id) == won

    assert (
        store.resolve(
            batch.batch_id,
            expected_version=1,
            outcome=outcome_of(batch, "alice"),
            idempotency_key="k1",
            decision_digest="d1",
        )
        == won
    )
    for decider, digest in (("alice", "d2"), ("bob", "d1"), ("bob", "d2")):
        with pytest.raises(IdempotencyConflict):
            store.resolve(
                batch.batch_id,
                expected_version=1,
                outcome=outcome_of(batch, decider),
                idempotency_key="k1",
                decision_digest=digest,
            )
    with pytest.raises(DecisionConflict):
        store.resolve(
            batch.batch_id,
            expected_version=2,
            outcome=outcome_of(batch, "bob"),
            idempotency_key="k2",
        )
    assert [e.event for e in store.audit_log(batch_id=batch.batch_id)] == [
        "batch_opened",
        "batch_resolved",
    ]


def test_audit_log_is_ordered_and_filtered(store):
    b1, b2 = batch_of(item()), batch_of(item(), run_id="run_b")
    store.create_batch(b1, [event(b1, "batch_opened", cycle=1)])
    store.create_batch(b2, [event(b2, "batch_opened")])
    store.append_audit([event(b1, "note", text="é")])
    log = store.audit_log()
    assert [(e.batch_id, e.event) for e in log] == [
        (b1.batch_id, "batch_opened"),
        (b2.batch_id, "batch_opened"),
        (b1.batch_id, "note"),
    ]
    assert log[0].seq < log[1].seq < log[2].seq
    assert log[0].detail == {"cycle": 1} and log[2].detail == {"text": "é"}
    assert log[0].at == datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert [e.event for e in store.audit_log(batch_id=b1.batch_id)] == ["batch_opened", "note"]
    assert [e.batch_id for e in store.audit_log(run_id="run_b")] == [b2.batch_id]
    assert [e.event for e in store.audit_log(after=log[0].seq)] == ["batch_opened", "note"]
    assert store.audit_log(after=log[2].seq) == []


# -- the gate over every store --------------------------------------------------------------


def test_refused_decisions_leave_the_state_unchanged(store):
    gate = ApprovalGate(None, fake_validate, store=store, clock=StepClock())
    a, b = item(), item()
    first = gate.open([item()])
    gate.submit(first.batch_id, {first.pending_ids[0]: Approve()})
    batch = gate.open([a, b])
    before = state_hash(store)
    for decisions in (
        {a.call_id: Approve()},
        {a.call_id: Approve(), b.call_id: Approve(), "call_nobody": Approve()},
        [(a.call_id, Approve()), (b.call_id, Approve()), (b.call_id, Approve())],
        {a.call_id: Approve(), b.call_id: Approve(), first.pending_ids[0]: Approve()},
        {a.call_id: Approve(), b.call_id: Edit(sql="DELETE FROM t")},
    ):
        with pytest.raises(DecisionError):
            gate.submit(batch.batch_id, decisions)
        assert state_hash(store) == before
    outcome = gate.submit(
        batch.batch_id, {a.call_id: Edit(sql="SELECT 9"), b.call_id: Reject(reason="why")}
    )
    assert outcome.runnable(a.call_id) == "SELECT 9 LIMIT 100"
    assert outcome.reasons() == {b.call_id: "why"}


def test_a_paused_batch_is_resumed_through_another_store(backend):
    if backend.kind == "memory":
        pytest.skip("a memory store lives in one process")
    first, second = backend.open(), backend.open()
    paused = ApprovalGate(None, fake_validate, store=first, run_id="run_resume")
    a = item()
    batch = paused.open([a])
    (pending,) = second.pending_batches()
    assert pending.batch.pending_ids == [a.call_id]
    other = ApprovalGate(None, fake_validate, store=second)
    outcome = other.submit(
        pending.batch_id, {a.call_id: Approve()}, actor="carol", idempotency_key="key-1"
    )
    assert paused.outcome(batch.batch_id) == outcome
    assert outcome.run_id == "run_resume" and outcome.runnable(a.call_id) == a.sql


def test_concurrent_submissions_in_threads_one_wins(backend):
    opener = backend.open()
    gate = ApprovalGate(None, fake_validate, store=opener)
    a = item()
    batch = gate.open([a])
    k = 6
    barrier = threading.Barrier(k)
    results: list[str] = []
    lock = threading.Lock()

    def submit(n: int) -> None:
        mine = ApprovalGate(
            None, fake_validate, store=backend.open() if backend.kind != "memory" else opener
        )
        barrier.wait()
        try:
            mine.submit(batch.batch_id, {a.call_id: Reject(reason=f"r{n}")}, actor=f"rev{n % 2}")
            outcome = "won"
        except DecisionConflict:
            outcome = "conflict"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["conflict"] * (k - 1) + ["won"]
    log = opener.audit_log(batch_id=batch.batch_id)
    assert sum(e.event == "batch_resolved" for e in log) == 1


SIDE_EFFECTS = "approval_side_effects"


def _race_in_process(
    backend: Backend, batch_id: str, call_ids: list[str], n: int, barrier, results
) -> None:
    """Submit a decision (two identities, different decisions), then try to run what was approved."""
    store = backend.open()
    gate = ApprovalGate(None, fake_validate, store=store)
    decision = {cid: Approve() if n % 2 else Edit(sql=f"SELECT {n} AS n") for cid in call_ids}
    barrier.wait()
    try:
        gate.submit(batch_id, decision, actor=f"rev{n % 2}", idempotency_key=f"key-{n}")
        result = "won"
    except DecisionConflict:
        result = "conflict"
    outcome = gate.outcome(batch_id)
    for call_id in outcome.runnable_ids:
        try:
            with gate.ledger.executing(outcome, call_id) as claim, store.engine.begin() as conn:
                sql = claim.sql
                claim.sent()
                conn.execute(
                    sa.text(
                        f"INSERT INTO {SIDE_EFFECTS} (call_id, sql_text, worker) VALUES (:c, :s, :w)"
                    ),
                    {"c": call_id, "s": sql, "w": n},
                )
        except AlreadyExecuted:
            pass
    results.put(result)
    store.close()


def test_concurrent_submissions_in_processes_one_wins(backend):
    if backend.kind == "memory":
        pytest.skip("a memory store lives in one process")
    store = backend.open()
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE {SIDE_EFFECTS} (call_id VARCHAR(64), sql_text TEXT, worker INTEGER)"
            )
        )
    a, b = item(), item()
    batch = ApprovalGate(None, fake_validate, store=store).open([a, b])
    store.engine.dispose()  # nothing pooled crosses the fork
    ctx = multiprocessing.get_context("fork")
    k = 4
    barrier, results = ctx.Barrier(k), ctx.Queue()
    procs = [
        ctx.Process(
            target=_race_in_process,
            args=(
                Backend(backend.kind, backend.url, backend.schema),
                batch.batch_id,
                [a.call_id, b.call_id],
                n,
                barrier,
                results,
            ),
        )
        for n in range(k)
    ]
    for p in procs:
        p.start()
    outcomes = sorted(results.get(timeout=60) for _ in range(k))
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * k
    assert outcomes == ["conflict"] * (k - 1) + ["won"]
    log = store.audit_log(batch_id=batch.batch_id)
    assert sum(e.event == "batch_resolved" for e in log) == 1
    record = store.get_batch(batch.batch_id)
    assert record.version == 2
    with store.engine.connect() as conn:
        ran = conn.execute(
            sa.text(f"SELECT call_id, sql_text FROM {SIDE_EFFECTS} ORDER BY call_id")
        ).all()
    winner = record.outcome
    assert sorted(ran) == sorted((cid, winner.runnable(cid)) for cid in (a.call_id, b.call_id))


def test_gate_review_over_the_store(store):
    gate = ApprovalGate(ApproveAll(), fake_validate, store=store, clock=StepClock())
    a, d = item(), item("DROP TABLE t")
    outcome = gate.review([a, d])
    assert store.get_batch(outcome.batch_id).outcome == outcome
    assert [e.event for e in store.audit_log(run_id=gate.run_id)] == [
        "batch_opened",
        "vote_cast",
        "item_resolved",
        "item_resolved",
        "batch_resolved",
    ]


@pytest.mark.parametrize("quorum", [1, 2])
def test_idempotency_keys_are_scoped_to_the_batch_and_the_reviewer(backend, quorum):
    """Another reviewer replaying a key gets a conflict, never the first reviewer's result."""
    store = backend.open()
    gate = ApprovalGate(None, fake_validate, store=store, run_id="run_keys", quorum=quorum)
    a = item()
    batch = gate.open([a])
    first = gate.submit(batch.batch_id, {a.call_id: Approve()}, actor="alice", idempotency_key="k")
    before = state_hash(store)

    other = ApprovalGate(None, fake_validate, store=backend.open(), run_id="run_keys")
    for decision in (Approve(), Reject(reason="no")):
        with pytest.raises(IdempotencyConflict) as info:
            other.submit(batch.batch_id, {a.call_id: decision}, actor="bob", idempotency_key="k")
        assert info.value.code == "idempotency_conflict"
        assert "another reviewer" in str(info.value)
    assert state_hash(store) == before  # bob's replay recorded nothing, not even a vote

    # the same reviewer's replay, from another process, still returns the first result
    again = other.submit(batch.batch_id, {a.call_id: Approve()}, actor="alice", idempotency_key="k")
    assert again == first
    with pytest.raises(IdempotencyConflict):
        other.submit(
            batch.batch_id, {a.call_id: Reject(reason="no")}, actor="alice", idempotency_key="k"
        )
    # the key belongs to (batch, reviewer): bob's own key still votes
    if quorum == 2:
        done = other.submit(
            batch.batch_id, {a.call_id: Approve()}, actor="bob", idempotency_key="k-bob"
        )
        assert (done.status, done.votes) == ("resolved", 2)
