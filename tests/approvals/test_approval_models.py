"""Models: ids, hashes, findings from any finding-like object, decisions, JSON round trips."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest
from approval_fakes import FakeFinding, item
from pydantic import ValidationError

from approvals import (
    ApprovalBatch,
    ApprovalItem,
    ApprovalOutcome,
    Approve,
    Edit,
    ItemCategory,
    Reject,
    parse_decision,
)


def test_call_ids_are_unique_even_for_identical_sql():
    ids = {item("SELECT 1").call_id for _ in range(200)}
    assert len(ids) == 200
    assert all(i.startswith("call_") and len(i) == 37 for i in ids)


def test_sql_hash_is_sha256_of_utf8():
    sql = "SELECT 'café' LIMIT 1"
    assert item(sql).sql_hash == hashlib.sha256(sql.encode("utf-8")).hexdigest()


def test_hash_must_match_the_sql():
    a = item()
    with pytest.raises(ValidationError, match="does not match"):
        ApprovalItem.model_validate({**a.model_dump(), "sql": a.sql + " "})


def test_findings_from_objects_dicts_and_models():
    a = item(
        findings=[
            FakeFinding("limit_added", "LIMIT added", "rewrite", "Limit"),
            {"code": "c", "message": "m"},
        ]
    )
    assert [(f.code, f.severity, f.node) for f in a.findings] == [
        ("limit_added", "rewrite", "Limit"),
        ("c", "warning", None),
    ]
    b = item(findings=a.findings)
    assert b.findings == a.findings


def test_batch_refuses_duplicate_ids_and_missing_categories():
    a = item()
    now = datetime.now(UTC)
    with pytest.raises(ValidationError, match="unique"):
        ApprovalBatch(
            batch_id="b",
            run_id="r",
            cycle=1,
            created_at=now,
            items=[a, a],
            categories={a.call_id: ItemCategory.NEEDS_APPROVAL},
        )
    with pytest.raises(ValidationError, match="category"):
        ApprovalBatch(batch_id="b", run_id="r", cycle=1, created_at=now, items=[a], categories={})


def test_batch_round_trips_through_json():
    a, d = item(), item("DELETE", refused=True)
    batch = ApprovalBatch(
        batch_id="b",
        run_id="r",
        cycle=2,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        items=[a, d],
        categories={a.call_id: ItemCategory.NEEDS_APPROVAL, d.call_id: ItemCategory.DENIED},
        notes={d.call_id: "no"},
    )
    again = ApprovalBatch.model_validate_json(batch.model_dump_json())
    assert again == batch
    assert again.pending == [a] and again.denied == [d] and again.auto_approved == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("approve", Approve()),
        (" Approve ", Approve()),
        ({"action": "approve"}, Approve()),
        ({"action": "reject", "reason": " too wide "}, Reject(reason="too wide")),
        ({"action": "edit", "sql": "SELECT 1"}, Edit(sql="SELECT 1")),
        (Reject(reason="x"), Reject(reason="x")),
    ],
)
def test_parse_decision(value, expected):
    assert parse_decision(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "reject",
        "yes",
        {"action": "reject"},
        {"action": "reject", "reason": ""},
        {"action": "edit", "sql": "  "},
        {"action": "drop"},
        3,
        None,
    ],
)
def test_parse_decision_refuses(value):
    with pytest.raises(ValueError):
        parse_decision(value)


def test_decisions_serialise_with_their_action():
    assert json.loads(Reject(reason="r").model_dump_json()) == {"action": "reject", "reason": "r"}


def test_outcome_round_trips_and_still_checks_hashes():
    from approval_fakes import fake_validate

    from approvals import ApprovalGate, ApproveAll

    a = item()
    outcome = ApprovalGate(ApproveAll(), fake_validate).review([a])
    again = ApprovalOutcome.model_validate_json(outcome.model_dump_json())
    assert again == outcome and again.runnable(a.call_id) == a.sql


def test_findings_with_enum_severities():
    from enum import Enum

    class Severity(Enum):
        ERROR = "error"

    a = item(
        findings=[
            FakeFinding("dml_in_tree", "no", Severity.ERROR),
            {"code": "c", "message": "m", "severity": Severity.ERROR},
        ]
    )
    assert [f.severity for f in a.findings] == ["error", "error"]


def test_findings_from_the_safety_package_when_present():
    safety = pytest.importorskip("safety")
    if not hasattr(safety, "SqlValidator"):
        pytest.skip("safety.SqlValidator is not there yet")
    from approvals import ApprovalGate, ApproveAll, ItemCategory

    validator = safety.SqlValidator(dialect="sqlite", policy=safety.SafetyPolicy())
    reviewer_saw = []

    def reviewer(batch):
        reviewer_saw.append(batch)
        return ApproveAll()(batch)

    ok, bad = (
        item("SELECT name FROM regions"),
        item("WITH x AS (DELETE FROM t RETURNING id) SELECT id FROM x"),
    )
    outcome = ApprovalGate(reviewer, validator.validate).review([ok, bad])
    batch = reviewer_saw[0]
    assert batch.categories[bad.call_id] is ItemCategory.DENIED
    assert outcome.resolutions[bad.call_id].reason.startswith("dml_in_tree: ")
    shown = batch.item(ok.call_id)
    assert outcome.runnable(ok.call_id) == shown.sql == validator.validate(ok.sql).sql
    assert "limit_added" in [f.code for f in shown.findings]
