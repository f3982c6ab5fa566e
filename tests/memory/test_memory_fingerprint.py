"""Template fingerprints: literals and aliases do not matter, structure does; columns resolved."""

from __future__ import annotations

import pytest

from orchestrator.features.memory import columns_read, schema_fingerprint, template_of

SCHEMA = {"orders": ["order_id", "customer_id", "status"], "customers": ["customer_id", "name"]}


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "SELECT name FROM customers WHERE customer_id = 5 LIMIT 5",
            "select NAME from Customers where CUSTOMER_ID = 77 limit 10",
        ),
        (
            "SELECT o.status FROM orders AS o WHERE o.status = 'open'",
            "SELECT x.status FROM orders AS x WHERE x.\"status\" = 'closed'",
        ),
        (
            "SELECT name FROM customers WHERE customer_id IN (1, 2, 3)",
            "SELECT name FROM customers WHERE customer_id IN (9)",
        ),
        (
            "SELECT name FROM customers WHERE customer_id > -3",
            "SELECT name FROM customers WHERE customer_id > 4.5",
        ),
    ],
)
def test_same_template_whatever_the_literals_and_aliases(a: str, b: str) -> None:
    assert template_of(a, "sqlite").template_id == template_of(b, "sqlite").template_id


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("SELECT name FROM customers", "SELECT customer_id FROM customers"),
        (
            "SELECT name FROM customers WHERE customer_id = 1",
            "SELECT name FROM customers WHERE customer_id > 1",
        ),
        (
            "SELECT name FROM customers WHERE name = 'a'",
            "SELECT name FROM customers WHERE name = 1",
        ),
        ("SELECT name FROM customers LIMIT 5", "SELECT name FROM customers"),
    ],
)
def test_different_structure_different_template(a: str, b: str) -> None:
    assert template_of(a, "sqlite").template_id != template_of(b, "sqlite").template_id


def test_columns_resolved_through_aliases_ctes_and_subqueries() -> None:
    sql = (
        "WITH big AS (SELECT customer_id FROM orders WHERE status = 'x') "
        "SELECT c.name FROM customers AS c WHERE c.customer_id IN (SELECT customer_id FROM big)"
    )
    tables, columns = columns_read(sql, "sqlite", SCHEMA)
    assert tables == {"orders", "customers"}
    assert columns == frozenset(
        {
            "orders.customer_id",
            "orders.status",
            "customers.name",
            "customers.customer_id",
        }
    )


def test_unresolvable_column_means_unknown_columns() -> None:
    _, columns = columns_read("SELECT secret FROM customers", "sqlite", SCHEMA)
    assert columns is None


def test_schema_fingerprint_changes_with_a_column() -> None:
    before = schema_fingerprint({"t": [("a", "INTEGER")]})
    assert before == schema_fingerprint({"T": [("A", "integer")]})
    assert before != schema_fingerprint({"t": [("a", "INTEGER"), ("b", "TEXT")]})
    assert before != schema_fingerprint({"t": [("a", "TEXT")]})
