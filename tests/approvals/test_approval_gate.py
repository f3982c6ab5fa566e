"""The in-process gate: categorisation, one reviewer call per cycle, exact decisions, exact SQL."""

from __future__ import annotations

import asyncio
import threading

import pytest
from approval_fakes import Calls, StepClock, fake_validate, item

from approvals import (
    ApprovalCancelled,
    ApprovalGate,
    Approve,
    ApproveAll,
    AutoApprovePolicy,
    DecisionConflict,
    DecisionError,
    Edit,
    IdempotencyConflict,
    ItemCategory,
    MemoryApprovalStore,
    NotRunnable,
    Reject,
    RejectAll,
    SqlHashMismatch,
    sql_hash,
)


def gate_with(reviewer, **kw) -> ApprovalGate:
    return ApprovalGate(reviewer=reviewer, validate=fake_validate, clock=StepClock(), **kw)


def test_approve_all_runs_exactly_the_shown_sql():
    reviewer = Calls(ApproveAll())
    gate = gate_with(reviewer)
    a, b = item("SELECT name FROM regions LIMIT 5"), item("SELECT id FROM orders", question_id="q2")
    outcome = gate.review([a, b])
    assert len(reviewer.batches) == 1
    assert outcome.reviewed and outcome.cycle == 1
    assert outcome.runnable(a.call_id) == "SELECT name FROM regions LIMIT 5"
    # the validator's rewrite is what the reviewer saw and what runs
    assert reviewer.batches[0].item(b.call_id).sql == "SELECT id FROM orders LIMIT 100"
    assert outcome.runnable(b.call_id) == "SELECT id FROM orders LIMIT 100"
    assert outcome.resolutions[b.call_id].sql_hash == sql_hash("SELECT id FROM orders LIMIT 100")


def test_identical_sql_gets_distinct_call_ids_and_both_are_decided():
    reviewer = Calls(
        lambda batch: {batch.pending_ids[0]: Approve(), batch.pending_ids[1]: Reject(reason="dup")}
    )
    gate = gate_with(reviewer)
    a, b = item(), item()
    assert a.call_id != b.call_id and a.sql_hash == b.sql_hash
    outcome = gate.review([a, b])
    assert outcome.resolutions[a.call_id].status == "approved"
    assert outcome.resolutions[b.call_id].status == "rejected"
    assert outcome.resolutions[b.call_id].reason == "dup"


def test_categorisation_denied_auto_and_pending():
    reviewer = Calls(ApproveAll())
    policy = AutoApprovePolicy(allowed_tables={"regions"})
    gate = gate_with(reviewer, policy=policy)
    denied_by_flag = item(
        "SELECT secret FROM t LIMIT 1",
        refused=True,
        findings=[{"code": "denied_column", "message": "secret is denied", "severity": "error"}],
    )
    denied_by_validator = item("WITH x AS (DELETE FROM t) SELECT 1 LIMIT 1", question_id="q2")
    auto = item("SELECT name FROM regions LIMIT 5", question_id="q3")
    pending = item("SELECT id FROM customers LIMIT 5", question_id="q4")
    outcome = gate.review([denied_by_flag, denied_by_validator, auto, pending])

    batch = reviewer.batches[0]
    assert batch.categories == {
        denied_by_flag.call_id: ItemCategory.DENIED,
        denied_by_validator.call_id: ItemCategory.DENIED,
        auto.call_id: ItemCategory.AUTO_APPROVED,
        pending.call_id: ItemCategory.NEEDS_APPROVAL,
    }
    assert batch.pending_ids == [pending.call_id]
    assert batch.item(denied_by_validator.call_id).refused
    statuses = {cid: r.status for cid, r in outcome.resolutions.items()}
    assert statuses == {
        denied_by_flag.call_id: "denied",
        denied_by_validator.call_id: "denied",
        auto.call_id: "auto_approved",
        pending.call_id: "approved",
    }
    assert outcome.resolutions[denied_by_flag.call_id].reason == "denied_column: secret is denied"
    assert (
        outcome.resolutions[denied_by_validator.call_id].reason
        == "dml_in_tree: DELETE is not allowed"
    )
    assert outcome.runnable(auto.call_id) == "SELECT name FROM regions LIMIT 5"
    with pytest.raises(NotRunnable) as err:
        outcome.runnable(denied_by_validator.call_id)
    assert err.value.code == "not_runnable" and "dml_in_tree" in str(err.value)


def test_reviewer_not_called_when_nothing_needs_approval():
    reviewer = Calls(ApproveAll())
    gate = gate_with(reviewer, policy=AutoApprovePolicy(allowed_tables={"regions"}))
    denied, auto = item("DELETE FROM regions"), item("SELECT name FROM regions LIMIT 3")
    outcome = gate.review([denied, auto])
    assert reviewer.batches == []
    assert not outcome.reviewed and outcome.decided_by == "sqlgate"
    assert outcome.runnable_ids == [auto.call_id]
    assert outcome.reasons() == {denied.call_id: "dml_in_tree: DELETE is not allowed"}


def test_auto_approval_is_off_by_default():
    reviewer = Calls(ApproveAll())
    gate_with(reviewer).review([item("SELECT name FROM regions LIMIT 3")])
    assert len(reviewer.batches) == 1


def test_approve_reject_edit_in_one_cycle():
    a, r, e = item(question_id="qa"), item(question_id="qr"), item(question_id="qe")
    decisions = {
        a.call_id: Approve(),
        r.call_id: Reject(reason="too broad"),
        e.call_id: Edit(sql="SELECT id FROM regions"),
    }
    outcome = gate_with(lambda batch: decisions).review([a, r, e])
    edited = outcome.resolutions[e.call_id]
    assert edited.status == "edited"
    assert edited.edited_from == e.sql
    assert [f.code for f in edited.findings] == ["limit_added"]
    assert outcome.runnable(e.call_id) == "SELECT id FROM regions LIMIT 100"
    assert outcome.runnable(a.call_id) == a.sql
    with pytest.raises(NotRunnable, match="too broad"):
        outcome.runnable(r.call_id)
    assert outcome.reasons() == {r.call_id: "too broad"}
    assert outcome.runnable_ids == [a.call_id, e.call_id]


def test_decisions_may_be_loose_values():
    a, b = item(), item(question_id="q2")
    outcome = gate_with(
        lambda batch: {a.call_id: "approve", b.call_id: {"action": "reject", "reason": "no"}}
    ).review([a, b])
    assert outcome.resolutions[a.call_id].status == "approved"
    assert outcome.resolutions[b.call_id].reason == "no"


def _refused(gate: ApprovalGate, items) -> DecisionError:
    store = gate.store
    with pytest.raises(DecisionError) as err:
        gate.review(items)
    (record,) = store.pending_batches()
    assert record.version == 1 and record.outcome is None
    assert [e.event for e in store.audit_log(batch_id=record.batch_id)] == ["batch_opened"]
    return err.value


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda a, b: {a.call_id: Approve()}, "missing_call_id"),
        (
            lambda a, b: {a.call_id: Approve(), b.call_id: Approve(), "call_nobody": Approve()},
            "unknown_call_id",
        ),
        (
            lambda a, b: [
                (a.call_id, Approve()),
                (b.call_id, Approve()),
                (a.call_id, Reject(reason="x")),
            ],
            "duplicate_call_id",
        ),
        (
            lambda a, b: {a.call_id: Approve(), b.call_id: Edit(sql="DELETE FROM regions")},
            "invalid_edit",
        ),
        (lambda a, b: {a.call_id: Approve(), b.call_id: "maybe"}, "invalid_decision"),
        (
            lambda a, b: {a.call_id: Approve(), b.call_id: {"action": "reject", "reason": "  "}},
            "invalid_decision",
        ),
    ],
)
def test_refused_decisions_change_nothing(make, code):
    a, b = item(), item(question_id="q2")
    err = _refused(gate_with(lambda batch: make(a, b)), [a, b])
    assert err.code == code
    assert err.problems[0].code == code


def test_every_problem_is_reported_at_once():
    a, b, c = item(), item(question_id="q2"), item(question_id="q3")
    err = _refused(
        gate_with(
            lambda batch: [(a.call_id, Approve()), (a.call_id, Approve()), ("call_x", Approve())]
        ),
        [a, b, c],
    )
    assert [(p.code, p.call_id) for p in err.problems] == [
        ("duplicate_call_id", a.call_id),
        ("unknown_call_id", "call_x"),
        ("missing_call_id", b.call_id),
        ("missing_call_id", c.call_id),
    ]
    assert err.call_ids == (a.call_id, "call_x", b.call_id, c.call_id)


def test_deciding_a_denied_item_is_refused():
    ok, denied = item(), item("DELETE FROM t", question_id="q2")
    err = _refused(
        gate_with(lambda batch: {ok.call_id: Approve(), denied.call_id: Approve()}), [ok, denied]
    )
    assert (err.code, err.call_ids) == ("not_pending_call_id", (denied.call_id,))


def test_stale_call_id_from_an_earlier_cycle():
    first = item()
    gate = gate_with(ApproveAll())
    gate.review([first])
    second = item("SELECT 2 LIMIT 1")
    gate.reviewer = lambda batch: {second.call_id: Approve(), first.call_id: Approve()}
    with pytest.raises(DecisionError) as err:
        gate.review([second])
    assert err.value.code == "stale_call_id"
    assert "cycle 1" in err.value.problems[0].message


def test_call_id_of_another_run_is_unknown_not_stale():
    store = MemoryApprovalStore()
    other = item()
    ApprovalGate(ApproveAll(), fake_validate, store=store).review([other])
    mine = item()
    gate = ApprovalGate(
        lambda b: {mine.call_id: Approve(), other.call_id: Approve()}, fake_validate, store=store
    )
    with pytest.raises(DecisionError) as err:
        gate.review([mine])
    assert err.value.code == "unknown_call_id"


def test_cycles_count_up_and_items_carry_their_cycle():
    reviewer = Calls(ApproveAll())
    gate = gate_with(reviewer)
    first = gate.review([item()])
    second = gate.review([item(), item()])
    assert (first.cycle, second.cycle) == (1, 2)
    assert [i.cycle for i in reviewer.batches[1].items] == [2, 2]
    assert len(reviewer.batches) == 2


def test_runnable_checks_the_hash():
    a = item()
    outcome = gate_with(ApproveAll()).review([a])
    resolution = outcome.resolutions[a.call_id]
    tampered = outcome.model_copy(
        update={
            "resolutions": {a.call_id: resolution.model_copy(update={"sql": a.sql + " OR 1=1"})}
        }
    )
    with pytest.raises(SqlHashMismatch) as err:
        tampered.runnable(a.call_id)
    assert err.value.code == "sql_hash_mismatch"
    with pytest.raises(NotRunnable):
        outcome.runnable("call_unknown")


def test_cancel_leaves_the_batch_pending():
    def cancel(batch):
        raise ApprovalCancelled("stop")

    gate = gate_with(cancel)
    with pytest.raises(ApprovalCancelled) as err:
        gate.review([item()])
    assert err.value.code == "approval_cancelled"
    assert len(gate.store.pending_batches()) == 1


def test_open_then_submit_later_with_idempotency():
    gate = gate_with(None)
    a = item()
    batch = gate.open([a])
    pending = gate.outcome(batch.batch_id)
    assert (pending.status, pending.resolutions, pending.votes, pending.quorum) == (
        "pending",
        {},
        0,
        1,
    )
    first = gate.submit(batch.batch_id, {a.call_id: "approve"}, actor="alice", idempotency_key="k1")
    assert first.decided_by == "alice"
    assert (
        gate.submit(batch.batch_id, {a.call_id: Approve()}, actor="alice", idempotency_key="k1")
        == first
    )
    with pytest.raises(IdempotencyConflict) as err:
        gate.submit(batch.batch_id, {a.call_id: Reject(reason="no")}, idempotency_key="k1")
    assert err.value.code == "idempotency_conflict"
    with pytest.raises(DecisionConflict) as err2:
        gate.submit(batch.batch_id, {a.call_id: Approve()}, idempotency_key="k2")
    assert err2.value.code == "decision_conflict"
    assert gate.outcome(batch.batch_id) == first


def test_review_without_reviewer_needs_submit():
    with pytest.raises(RuntimeError):
        gate_with(None).review([item()])


def test_concurrent_submissions_exactly_one_wins():
    gate = gate_with(None)
    a = item()
    batch = gate.open([a])
    barrier = threading.Barrier(8)
    wins, conflicts = [], []

    def submit(n: int) -> None:
        barrier.wait()
        try:
            wins.append(
                gate.submit(batch.batch_id, {a.call_id: Reject(reason=f"r{n}")}, actor=f"rev{n}")
            )
        except DecisionConflict:
            conflicts.append(n)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(conflicts) == 7
    resolved = [
        e for e in gate.store.audit_log(batch_id=batch.batch_id) if e.event == "batch_resolved"
    ]
    assert len(resolved) == 1 and resolved[0].actor == wins[0].decided_by


def test_audit_log_records_every_state_change():
    gate = gate_with(RejectAll("not today"), actor="bob")
    a, d = item(), item("DROP TABLE x")
    outcome = gate.review([a, d])
    log = gate.store.audit_log(run_id=gate.run_id)
    assert [e.seq for e in log] == [1, 2, 3, 4, 5]
    assert [(e.event, e.call_id, e.actor) for e in log] == [
        ("batch_opened", None, "sqlgate"),
        ("vote_cast", None, "bob"),
        ("item_resolved", a.call_id, "bob"),
        ("item_resolved", d.call_id, "sqlgate"),
        ("batch_resolved", None, "bob"),
    ]
    assert log[0].detail == {
        "cycle": 1,
        "quorum": 1,
        "deadline": None,
        "pending": [a.call_id],
        "denied": [d.call_id],
        "auto_approved": [],
    }
    assert log[2].detail["reason"] == "not today"
    assert outcome.decided_at == log[-1].at


def test_duplicate_items_are_refused_before_anything_is_stored():
    a = item()
    gate = gate_with(ApproveAll())
    with pytest.raises(ValueError, match="share a call_id"):
        gate.review([a, a])
    assert gate.store.list_batches() == []


def test_areview_runs_off_the_event_loop():
    seen = []

    def reviewer(batch):
        seen.append(threading.current_thread() is threading.main_thread())
        return ApproveAll()(batch)

    a = item()
    outcome = asyncio.run(gate_with(reviewer).areview([a]))
    assert outcome.runnable(a.call_id) == a.sql
    assert seen == [False]
