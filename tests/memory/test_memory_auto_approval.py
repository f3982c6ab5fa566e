"""Earned auto-approval through the real approval gate, on SQLite and PostgreSQL state: it fires
only after the configured evidence, never across schema or policy changes, never after a
rejection, not after a revocation, and the audit log names the approvals that justified it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from approvals import ApprovalGate, ApprovalItem, ItemCategory
from approvals.policy import EarnedApprovalRule
from orchestrator.features.memory import MemoryScope, MemorySettings, MemoryStore, ReviewMemory
from safety import SafetyPolicy, SqlValidator
from tests.memory.conftest import POLICY, SHOP, Clock

SQL_2024 = "SELECT name FROM customers WHERE customer_id = 7"
SQL_2025 = "SELECT name FROM customers WHERE customer_id = 42"  # same template
RULE = EarnedApprovalRule(enabled=True, min_approvals=2, min_reviewers=2, max_age_days=30)


def _memory(store: MemoryStore, rule: EarnedApprovalRule = RULE) -> ReviewMemory:
    return ReviewMemory(store, MemorySettings(auto_approval=rule))


def _category(
    memory: ReviewMemory, scope: MemoryScope, sql: str = SQL_2025
) -> tuple[ItemCategory, ApprovalGate, str]:
    validator = SqlValidator(
        dialect="sqlite",
        policy=SafetyPolicy(max_limit=1000, star="reject"),
        schema={t: [c for c, _ in cols] for t, cols in SHOP.items()},
    )
    gate = ApprovalGate(
        reviewer=None, validate=validator.validate, policy=memory.auto_approval(scope)
    )
    item = ApprovalItem.new(question_id="q1", question="Who is customer 42?", sql=sql)
    batch = gate.open([item])
    return batch.categories[item.call_id], gate, batch.batch_id


def _approve(
    memory: ReviewMemory, scope: MemoryScope, reviewer: str, status: str = "approved"
) -> int:
    return memory.record(
        scope,
        question="Who is customer 7?",
        sql=SQL_2024 + " LIMIT 1001",
        status=status,  # type: ignore[arg-type]
        reviewers=[reviewer],
    ).id


def test_off_by_default(store: MemoryStore, scope: MemoryScope) -> None:
    memory = ReviewMemory(store)
    for who in ("alice", "bob", "carol"):
        _approve(memory, scope, who)
    assert memory.auto_approval(scope) is None
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL


def test_fires_only_after_the_configured_evidence(store: MemoryStore, scope: MemoryScope) -> None:
    memory = _memory(store)
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL
    first = _approve(memory, scope, "alice")
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL  # one approval
    second = _approve(memory, scope, "alice")
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL  # one reviewer
    memory.record(scope, question="seed", sql=SQL_2024, status="seeded", reviewers=["bob"])
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL  # seeding is no approval
    third = _approve(memory, scope, "bob", status="edited")

    category, gate, batch_id = _category(memory, scope)

    assert category is ItemCategory.AUTO_APPROVED
    resolved = [
        e for e in gate.store.audit_log() if e.event == "item_resolved" and e.batch_id == batch_id
    ]
    assert [e.detail["status"] for e in resolved] == ["auto_approved"]
    reason = resolved[0].detail["reason"]
    assert "earned auto-approval" in reason and "alice, bob" in reason
    for example_id in (first, second, third):
        assert f"memory example {example_id} " in reason


def test_never_across_schema_or_policy_changes(store: MemoryStore, scope: MemoryScope) -> None:
    memory = _memory(store)
    _approve(memory, scope, "alice")
    _approve(memory, scope, "bob")
    assert _category(memory, scope)[0] is ItemCategory.AUTO_APPROVED

    wider = {**SHOP, "customers": [*SHOP["customers"], ("phone", "TEXT")]}
    new_schema = MemoryScope.of(scope.database, "sqlite", wider, POLICY)
    new_policy = MemoryScope.of(scope.database, "sqlite", SHOP, {**POLICY, "max_limit": 50})
    other_db = MemoryScope.of("sqlite:///other.db", "sqlite", SHOP, POLICY)
    for changed in (new_schema, new_policy, other_db):
        assert _category(memory, changed)[0] is ItemCategory.NEEDS_APPROVAL


def test_never_after_a_rejection(store: MemoryStore, scope: MemoryScope) -> None:
    memory = _memory(store)
    _approve(memory, scope, "alice")
    _approve(memory, scope, "bob")
    memory.record(
        scope,
        question="Who is customer 9?",
        sql=SQL_2024.replace("7", "9") + " LIMIT 1001",
        status="rejected",
        reviewers=["carol"],
        reason="customer data is private",
    )

    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL
    _approve(memory, scope, "alice")
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL  # only what came after counts
    _approve(memory, scope, "bob")
    assert _category(memory, scope)[0] is ItemCategory.AUTO_APPROVED


def test_revoke_makes_it_need_review_again(store: MemoryStore, scope: MemoryScope) -> None:
    memory = _memory(store)
    _approve(memory, scope, "alice")
    _approve(memory, scope, "bob")
    assert _category(memory, scope)[0] is ItemCategory.AUTO_APPROVED

    template = memory.template(SQL_2025 + " LIMIT 1001", "sqlite")  # as validated (the row cap + 1)
    revoked = store.revoke(template[:8], actor="dana", reason="too broad")

    assert revoked.template_id == template
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL


def test_old_approvals_expire(store: MemoryStore, scope: MemoryScope, clock: Clock) -> None:
    memory = _memory(store)
    _approve(memory, scope, "alice")
    _approve(memory, scope, "bob")
    clock.advance(days=31)
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL


def test_approvals_with_unknown_columns_cannot_vouch(
    store: MemoryStore, scope: MemoryScope
) -> None:
    memory = _memory(store)
    blind = replace(
        scope, schema={"orders": ["order_id"]}
    )  # same fingerprints, columns unresolvable
    _approve(memory, blind, "alice")
    _approve(memory, blind, "bob")
    assert store.examples()[0].columns is None
    assert _category(memory, scope)[0] is ItemCategory.NEEDS_APPROVAL


@pytest.mark.parametrize("sql", ["SELECT email FROM customers WHERE customer_id = 42"])
def test_another_template_earns_nothing(store: MemoryStore, scope: MemoryScope, sql: str) -> None:
    memory = _memory(store, RULE.model_copy(update={"min_reviewers": 1, "min_approvals": 1}))
    _approve(memory, scope, "alice")
    assert _category(memory, scope)[0] is ItemCategory.AUTO_APPROVED
    assert _category(memory, scope, sql)[0] is ItemCategory.NEEDS_APPROVAL


def test_a_limit_above_the_reviewed_one_goes_to_a_person(
    store: MemoryStore, scope: MemoryScope
) -> None:
    """The envelope of earned trust: ``LIMIT 20`` reviewed twice does not cover ``LIMIT 1000``."""
    memory = _memory(store)
    for who in ("alice", "bob"):
        memory.record(
            scope, question="q", sql=SQL_2024 + " LIMIT 20", status="approved", reviewers=[who]
        )
    assert _category(memory, scope, SQL_2025 + " LIMIT 20")[0] is ItemCategory.AUTO_APPROVED
    assert _category(memory, scope, SQL_2025 + " LIMIT 5")[0] is ItemCategory.AUTO_APPROVED
    assert _category(memory, scope, SQL_2025 + " LIMIT 1000")[0] is ItemCategory.NEEDS_APPROVAL
    assert _category(memory, scope, SQL_2025)[0] is ItemCategory.NEEDS_APPROVAL  # LIMIT 1001


def test_under_the_values_envelope_numbers_stay_in_the_reviewed_range(
    store: MemoryStore, scope: MemoryScope
) -> None:
    memory = _memory(store, RULE.model_copy(update={"envelope": "values"}))
    for who, customer in (("alice", 7), ("bob", 50)):
        memory.record(
            scope,
            question="q",
            sql=f"SELECT name FROM customers WHERE customer_id = {customer} LIMIT 1001",
            status="approved",
            reviewers=[who],
        )
    category, gate, batch_id = _category(memory, scope)  # 42: between 7 and 50
    assert category is ItemCategory.AUTO_APPROVED
    [resolved] = [e for e in gate.store.audit_log(batch_id=batch_id) if e.call_id]
    assert "within the reviewed values (LIMIT <= 1001; 7..50)" in resolved.detail["reason"]
    for outside in (51, -1e300, 6):
        sql = f"SELECT name FROM customers WHERE customer_id = {outside}"
        assert _category(memory, scope, sql)[0] is ItemCategory.NEEDS_APPROVAL, outside
