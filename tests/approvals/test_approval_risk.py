"""Risk levels drive the approval rule: high needs the quorum the policy names, never auto."""

from __future__ import annotations

import pytest

from approvals import (
    ApprovalGate,
    ApprovalItem,
    ApproveAll,
    AutoApprovePolicy,
    BatchSummary,
    RiskApproval,
    StatementRisk,
    list_pending,
)
from tests.approvals.approval_fakes import fake_validate


def _level_by_table(item: ApprovalItem) -> StatementRisk:
    """Stands in for the planner: ``customers`` is sensitive, ``orders`` is scanned."""
    if "customers" in item.sql:
        return StatementRisk(level="high", reasons=["reads sensitive customers.email"])
    if "orders" in item.sql:
        return StatementRisk(level="medium", reasons=["full scan of orders"], full_scans=["orders"])
    return StatementRisk(level="low")


def _item(sql: str) -> ApprovalItem:
    return ApprovalItem.new(question_id="q", question="Which?", sql=sql)


RULE = RiskApproval(quorum={"high": 2}, auto_levels=frozenset({"low"}))
STATIC = AutoApprovePolicy(allowed_tables={"regions", "customers", "orders"})


def test_risk_is_stored_with_each_item_before_review(store) -> None:
    gate = ApprovalGate(None, fake_validate, store=store, assess=_level_by_table)
    batch = gate.open([_item("SELECT name FROM orders LIMIT 5")])
    stored = store.get_batch(batch.batch_id).batch
    risk = stored.items[0].risk
    assert risk is not None and risk.level == "medium" and risk.full_scans == ["orders"]
    [summary] = list_pending(store)
    assert isinstance(summary, BatchSummary) and summary.risk == "medium"
    [opened] = [e for e in store.audit_log(batch_id=batch.batch_id) if e.event == "batch_opened"]
    assert opened.detail["risk"][batch.items[0].call_id]["level"] == "medium"


def test_a_high_risk_statement_raises_the_quorum_and_is_never_auto_approved(store) -> None:
    gate = ApprovalGate(
        ApproveAll(),
        fake_validate,
        policy=STATIC,
        store=store,
        assess=_level_by_table,
        risk_approval=RULE,
    )
    batch = gate.open(
        [_item("SELECT name FROM regions LIMIT 5"), _item("SELECT email FROM customers LIMIT 5")]
    )
    assert [i.sql for i in batch.auto_approved] == ["SELECT name FROM regions LIMIT 5"]
    assert [i.sql for i in batch.pending] == ["SELECT email FROM customers LIMIT 5"]
    assert batch.quorum == 2
    first = gate.submit(batch.batch_id, {batch.pending_ids[0]: "approve"}, actor="ann")
    assert first.status == "pending" and first.votes == 1
    second = gate.submit(batch.batch_id, {batch.pending_ids[0]: "approve"}, actor="bob")
    assert second.status == "resolved" and second.runnable_ids == [i.call_id for i in batch.items]


def test_a_level_outside_the_auto_levels_goes_to_a_reviewer(store) -> None:
    gate = ApprovalGate(
        None, fake_validate, policy=STATIC, store=store, assess=_level_by_table, risk_approval=RULE
    )
    batch = gate.open([_item("SELECT id FROM orders LIMIT 5")])
    assert batch.pending_ids == [batch.items[0].call_id]
    assert batch.quorum == 1  # medium keeps the gate's own quorum


def test_the_gates_own_quorum_is_a_floor() -> None:
    gate = ApprovalGate(None, fake_validate, quorum=3, assess=_level_by_table, risk_approval=RULE)
    assert gate.open([_item("SELECT email FROM customers LIMIT 5")]).quorum == 3


def test_high_can_never_be_made_auto_approvable() -> None:
    rule = RiskApproval(auto_levels=frozenset({"low", "medium", "high"}))
    assert not rule.may_auto_approve("high")
    with pytest.raises(ValueError):
        RiskApproval(quorum={"high": 0})


def test_without_an_assessor_items_carry_no_risk() -> None:
    gate = ApprovalGate(None, fake_validate, policy=STATIC)
    batch = gate.open([_item("SELECT name FROM customers LIMIT 5")])
    assert batch.items[0].risk is None
    assert batch.auto_approved  # the static policy alone decides, as before


def test_a_failing_assessment_is_high_risk_not_a_way_around_review() -> None:
    def broken(item: ApprovalItem) -> StatementRisk:
        raise RuntimeError("planner seam broke")

    gate = ApprovalGate(None, fake_validate, policy=STATIC, assess=broken, risk_approval=RULE)
    batch = gate.open([_item("SELECT name FROM regions LIMIT 5")])
    [item] = batch.pending
    assert item.risk is not None and item.risk.level == "high"
    assert item.risk.reasons == ["the risk could not be assessed (RuntimeError)"]
    assert batch.quorum == 2
