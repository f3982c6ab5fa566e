"""Explicit auto-approval over allowlisted tables."""

from __future__ import annotations

import pytest
from approval_fakes import item

from approvals import AutoApprovePolicy


@pytest.mark.parametrize(
    ("sql", "approved"),
    [
        ("SELECT name FROM regions LIMIT 5", True),
        ("SELECT r.name FROM regions AS r JOIN products p ON p.region_id = r.id LIMIT 5", True),
        ("WITH top AS (SELECT name FROM regions) SELECT name FROM top LIMIT 5", True),
        ("SELECT name FROM regions", False),  # no LIMIT
        ("SELECT name FROM customers LIMIT 5", False),  # table not allowlisted
        ("SELECT name FROM regions WHERE id IN (SELECT id FROM customers) LIMIT 5", False),
        ("SELECT 1 LIMIT 1", False),  # reads no allowlisted table
        ("NOT SQL AT ALL (", False),
    ],
)
def test_allowlist(sql, approved):
    policy = AutoApprovePolicy(allowed_tables={"Regions", "products"})
    assert bool(policy(item(sql))) is approved


def test_limit_can_be_optional():
    assert AutoApprovePolicy(allowed_tables={"regions"}, require_limit=False)(
        item("SELECT name FROM regions")
    )


def test_warnings_and_refusals_go_to_a_reviewer():
    policy = AutoApprovePolicy(allowed_tables={"regions"})
    warned = item(
        findings=[{"code": "cartesian", "message": "no join condition", "severity": "warning"}]
    )
    assert policy(warned) is None
    assert AutoApprovePolicy(allowed_tables={"regions"}, allow_warnings=True)(warned)
    assert policy(item(refused=True)) is None
    assert policy(
        item(findings=[{"code": "limit_added", "message": "LIMIT added", "severity": "rewrite"}])
    )


def test_empty_allowlist_approves_nothing():
    assert AutoApprovePolicy()(item()) is None
