"""Deadlines (injected clock) and k-of-n quorum, on every store."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from approval_fakes import ManualClock, fake_validate, item

from approvals import (
    ApprovalGate,
    Approve,
    BatchExpired,
    DecisionConflict,
    DecisionError,
    DuplicateVote,
    Edit,
    ExpirySweeper,
    Reject,
)


def gate_on(store, clock, **kw) -> ApprovalGate:
    return ApprovalGate(None, fake_validate, store=store, clock=clock, **kw)


# -- deadlines ------------------------------------------------------------------------------


def test_expiry_applies_once_at_the_deadline(store):
    clock = ManualClock()
    gate = gate_on(store, clock, ttl=timedelta(seconds=60))
    a, d = item(), item("DELETE FROM t")
    batch = gate.open([a, d])
    assert batch.deadline == clock.now + timedelta(seconds=60)
    sweeper = ExpirySweeper(store, clock)
    clock.advance(59.9)
    assert sweeper.sweep() == []
    clock.advance(0.1)
    (expired,) = sweeper.sweep()
    assert expired.status == "expired" and expired.decided_by == "sqlgate-expiry"
    assert expired.resolutions[a.call_id].status == "rejected"
    assert expired.resolutions[a.call_id].reason.startswith(
        "expired: no decision before 2026-01-01T00:01:00"
    )
    assert expired.resolutions[d.call_id].status == "denied"
    clock.advance(3600)
    assert sweeper.sweep() == []
    assert store.get_batch(batch.batch_id).status == "expired"
    assert [e.event for e in store.audit_log(batch_id=batch.batch_id)].count("batch_expired") == 1


def test_a_late_decision_is_refused_as_expired(store):
    clock = ManualClock()
    gate = gate_on(store, clock, ttl=timedelta(seconds=10))
    a = item()
    batch = gate.open([a])
    clock.advance(10)
    with pytest.raises(BatchExpired) as err:
        gate.submit(batch.batch_id, {a.call_id: Approve()})
    assert err.value.code == "batch_expired"
    assert gate.outcome(batch.batch_id).status == "expired"  # the late decision applied the expiry
    with pytest.raises(BatchExpired):
        gate.submit(batch.batch_id, {a.call_id: Approve()})
    assert ExpirySweeper(store, clock).sweep() == []


def test_a_decision_just_before_the_deadline_makes_the_sweeper_a_no_op(store):
    clock = ManualClock()
    gate = gate_on(store, clock, ttl=timedelta(seconds=10))
    a = item()
    batch = gate.open([a])
    clock.advance(9.999)
    outcome = gate.submit(batch.batch_id, {a.call_id: Approve()})
    clock.advance(5)
    assert ExpirySweeper(store, clock).sweep() == []
    assert gate.outcome(batch.batch_id) == outcome


def test_the_deadline_survives_a_restart(backend):
    clock = ManualClock()
    batch = gate_on(backend.open(), clock, ttl=timedelta(minutes=5)).open([item()])
    clock.advance(301)
    (expired,) = ExpirySweeper(backend.open(), clock).sweep()  # a sweeper of a new process
    assert expired.batch_id == batch.batch_id


def test_approve_on_expiry_when_configured(store):
    clock = ManualClock()
    a = item()
    gate = gate_on(store, clock, ttl=timedelta(seconds=1), on_expiry="approve")
    gate.open([a])
    clock.advance(1)
    (expired,) = ExpirySweeper(store, clock).sweep()
    assert expired.runnable(a.call_id) == a.sql


def test_concurrent_sweepers_apply_it_once(backend):
    clock = ManualClock()
    gate = gate_on(backend.open(), clock, ttl=timedelta(seconds=1))
    batch = gate.open([item()])
    clock.advance(2)
    sweepers = [ExpirySweeper(backend.open(), clock) for _ in range(4)]
    barrier, applied = threading.Barrier(4), []

    def sweep(s):
        barrier.wait()
        applied.extend(s.sweep())

    threads = [threading.Thread(target=sweep, args=(s,)) for s in sweepers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(applied) == 1
    assert [e.event for e in gate.store.audit_log(batch_id=batch.batch_id)].count(
        "batch_expired"
    ) == 1


def test_await_outcome_sees_a_decision_from_elsewhere_without_blocking(store):
    clock = ManualClock()
    a = item()
    waiting = gate_on(store, clock)
    batch = waiting.open([a])
    naps = []

    async def sleep(seconds):
        naps.append(seconds)
        if len(naps) == 2:  # a reviewer elsewhere decides while we wait
            gate_on(store, clock).submit(batch.batch_id, {a.call_id: Approve()}, actor="dana")
        await asyncio.sleep(0)

    outcome = asyncio.run(waiting.await_outcome(batch.batch_id, poll=0.25, sleep=sleep))
    assert naps == [0.25, 0.25]
    assert outcome.decided_by == "dana" and outcome.runnable(a.call_id) == a.sql


def test_await_outcome_applies_the_deadline_and_times_out(store):
    clock = ManualClock()
    gate = gate_on(store, clock, ttl=timedelta(seconds=1))
    batch = gate.open([item()])

    async def sleep(seconds):
        clock.advance(seconds)

    assert (
        asyncio.run(gate.await_outcome(batch.batch_id, poll=0.5, sleep=sleep)).status == "expired"
    )
    other = gate_on(store, clock).open([item()])
    with pytest.raises(TimeoutError):
        asyncio.run(gate.await_outcome(other.batch_id, poll=0.5, timeout=1.0, sleep=sleep))


# -- quorum ---------------------------------------------------------------------------------


def test_two_of_three_resolves_on_the_second_distinct_vote(store):
    clock = ManualClock()
    gate = gate_on(store, clock, quorum=2)
    a, b = item(), item()
    batch = gate.open([a, b])
    first = gate.submit(batch.batch_id, {a.call_id: Approve(), b.call_id: Approve()}, actor="alice")
    assert (first.status, first.votes, first.quorum, first.resolutions) == ("pending", 1, 2, {})
    (summary,) = store.list_summaries()
    assert (summary.pending, summary.votes, summary.quorum, summary.version) == (2, 1, 2, 2)
    before = store.get_batch(batch.batch_id)
    with pytest.raises(DuplicateVote) as err:
        gate.submit(
            batch.batch_id,
            {a.call_id: Approve(), b.call_id: Reject(reason="changed my mind")},
            actor="alice",
        )
    assert err.value.code == "duplicate_vote"
    assert store.get_batch(batch.batch_id) == before
    final = gate.submit(batch.batch_id, {a.call_id: Approve(), b.call_id: Approve()}, actor="bob")
    assert (final.status, final.votes, final.decided_by) == ("resolved", 2, "bob")
    assert final.runnable_ids == [a.call_id, b.call_id]
    with pytest.raises(DecisionConflict):
        gate.submit(batch.batch_id, {a.call_id: Approve(), b.call_id: Approve()}, actor="carol")
    log = [
        (e.event, e.actor)
        for e in store.audit_log(batch_id=batch.batch_id)
        if e.event != "item_resolved"
    ]
    assert log == [
        ("batch_opened", "sqlgate"),
        ("vote_cast", "alice"),
        ("vote_cast", "bob"),
        ("batch_resolved", "bob"),
    ]


def test_quorum_policy_rejection_vetoes_and_disagreement_rejects(store):
    gate = gate_on(store, ManualClock(), quorum=2)
    veto, same_edit, split = item(), item(), item()
    batch = gate.open([veto, same_edit, split])
    gate.submit(
        batch.batch_id,
        {
            veto.call_id: Approve(),
            same_edit.call_id: Edit(sql="SELECT 1"),
            split.call_id: Approve(),
        },
        actor="alice",
    )
    final = gate.submit(
        batch.batch_id,
        {
            veto.call_id: Reject(reason="PII"),
            same_edit.call_id: Edit(sql="SELECT 1"),
            split.call_id: Edit(sql="SELECT 2"),
        },
        actor="bob",
    )
    r = final.resolutions
    assert (r[veto.call_id].status, r[veto.call_id].reason) == ("rejected", "bob: PII")
    assert final.runnable(same_edit.call_id) == "SELECT 1 LIMIT 100"
    assert (r[split.call_id].status, r[split.call_id].reason) == (
        "rejected",
        "reviewers disagreed (alice: approved, bob: edited)",
    )


def test_a_wrong_vote_is_refused_and_not_counted(store):
    gate = gate_on(store, ManualClock(), quorum=2)
    a = item()
    batch = gate.open([a])
    with pytest.raises(DecisionError):
        gate.submit(batch.batch_id, {}, actor="alice")
    assert store.get_batch(batch.batch_id).votes == []


def test_a_repeated_vote_with_its_idempotency_key_is_a_replay(store):
    gate = gate_on(store, ManualClock(), quorum=2)
    a = item()
    batch = gate.open([a])
    first = gate.submit(
        batch.batch_id, {a.call_id: Approve()}, actor="alice", idempotency_key="alice-1"
    )
    assert (
        gate.submit(
            batch.batch_id, {a.call_id: Approve()}, actor="alice", idempotency_key="alice-1"
        )
        == first
    )
    assert len(store.get_batch(batch.batch_id).votes) == 1


def test_concurrent_distinct_votes_all_count(backend):
    gate = gate_on(backend.open(), ManualClock(), quorum=3)
    a = item()
    batch = gate.open([a])
    barrier, results, errors = threading.Barrier(3), [], []

    def vote(who):
        mine = gate_on(
            backend.open() if backend.kind != "memory" else gate.store, ManualClock(), quorum=3
        )
        barrier.wait()
        try:
            results.append(mine.submit(batch.batch_id, {a.call_id: Approve()}, actor=who))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=vote, args=(who,)) for who in ("ann", "ben", "cy")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(o.status for o in results) == ["pending", "pending", "resolved"]
    record = gate.store.get_batch(batch.batch_id)
    assert sorted(v.actor for v in record.votes) == ["ann", "ben", "cy"] and record.version == 4


def test_a_superseded_batch_is_closed_once_with_its_reason(store):
    from approvals.expiry import supersede

    clock = ManualClock()
    gate = gate_on(store, clock)
    a, d = item(), item("DELETE FROM t")
    batch = gate.open([a, d])
    record = store.get_batch(batch.batch_id)

    closed = supersede(store, record, clock.now, reason="run taken over", actor="host:1")

    assert closed is not None and closed.status == "expired" and closed.decided_by == "host:1"
    assert closed.resolutions[a.call_id].reason == "superseded: run taken over"
    assert closed.resolutions[d.call_id].status == "denied"
    assert (
        supersede(store, store.get_batch(batch.batch_id), clock.now, reason="x", actor="y") is None
    )
    assert [e.event for e in store.audit_log(batch_id=batch.batch_id)].count("batch_expired") == 1
