import hashlib
import sqlite3
from pathlib import Path

import pytest

from orchestrator.features.demo.database import (
    DEMO_SCHEMA_VERSION,
    build_demo_database,
    ensure_demo_database,
)

TABLES = ("regions", "employees", "customers", "categories", "products", "orders", "order_items")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_database(tmp_path_factory.mktemp("demo") / "demo.sqlite")


@pytest.fixture
def con(demo: Path):
    connection = sqlite3.connect(f"file:{demo}?mode=ro", uri=True)
    yield connection
    connection.close()


def scalar(con: sqlite3.Connection, sql: str):
    return con.execute(sql).fetchone()[0]


def test_same_seed_gives_byte_identical_file(demo: Path, tmp_path: Path) -> None:
    again = build_demo_database(tmp_path / "again.sqlite", seed=7)
    assert sha256(again) == sha256(demo)


def test_other_seed_gives_other_data(demo: Path, tmp_path: Path) -> None:
    other = build_demo_database(tmp_path / "other.sqlite", seed=8)
    assert sha256(other) != sha256(demo)


def test_has_thousands_of_rows(con: sqlite3.Connection) -> None:
    counts = {table: scalar(con, f"SELECT COUNT(*) FROM {table}") for table in TABLES}
    assert counts["regions"] == 6
    assert counts["categories"] == 8
    assert counts["customers"] == 500
    assert counts["products"] == 120
    assert counts["orders"] == 4000
    assert 8000 <= counts["order_items"] <= 12000
    assert 20 <= counts["employees"] <= 60


def test_foreign_keys_are_declared_and_hold(con: sqlite3.Connection) -> None:
    declared = {
        (table, row[2], row[3], row[4])
        for table in TABLES
        for row in con.execute(f"PRAGMA foreign_key_list({table})")
    }
    assert ("employees", "employees", "manager_id", "employee_id") in declared
    assert ("orders", "customers", "customer_id", "customer_id") in declared
    assert ("order_items", "products", "product_id", "product_id") in declared
    assert ("products", "categories", "category_id", "category_id") in declared
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []


def test_orders_span_2024_and_2025_with_the_four_statuses(con: sqlite3.Connection) -> None:
    assert scalar(con, "SELECT MIN(order_date) FROM orders") >= "2024-01-01"
    assert scalar(con, "SELECT MAX(order_date) FROM orders") <= "2025-12-31"
    statuses = {row[0] for row in con.execute("SELECT DISTINCT status FROM orders")}
    assert statuses == {"delivered", "shipped", "cancelled", "returned"}
    # no order before its customer signed up
    assert (
        scalar(
            con,
            """
        SELECT COUNT(*) FROM orders o JOIN customers c USING (customer_id)
        WHERE o.order_date < c.signup_date""",
        )
        == 0
    )
    assert (
        scalar(
            con,
            "SELECT COUNT(*) FROM orders WHERE status = 'cancelled' AND shipped_date IS NOT NULL",
        )
        == 0
    )


def test_employees_form_one_hierarchy(con: sqlite3.Connection) -> None:
    assert scalar(con, "SELECT COUNT(*) FROM employees WHERE manager_id IS NULL") == 1
    # every employee reaches the top through manager_id
    reachable = scalar(
        con,
        """
        WITH RECURSIVE chain(employee_id) AS (
            SELECT employee_id FROM employees WHERE manager_id IS NULL
            UNION ALL
            SELECT e.employee_id FROM employees e JOIN chain ON e.manager_id = chain.employee_id)
        SELECT COUNT(*) FROM chain""",
    )
    assert reachable == scalar(con, "SELECT COUNT(*) FROM employees")


def test_values_look_real(con: sqlite3.Connection) -> None:
    assert scalar(con, "SELECT COUNT(*) FROM products WHERE cost >= price OR price <= 0") == 0
    assert (
        scalar(
            con,
            "SELECT COUNT(*) FROM order_items WHERE quantity <= 0 OR discount < 0 OR discount > 0.5",
        )
        == 0
    )
    segments = {row[0] for row in con.execute("SELECT DISTINCT segment FROM customers")}
    assert segments == {"Consumer", "Small Business", "Enterprise"}
    assert scalar(con, "SELECT COUNT(DISTINCT email) FROM customers") == 500
    assert scalar(con, "SELECT name FROM regions WHERE region_id = 1") == "Northeast"


def test_build_replaces_an_existing_file_and_leaves_no_temporaries(tmp_path: Path) -> None:
    target = tmp_path / "demo.sqlite"
    target.write_text("not a database")
    build_demo_database(target)
    assert scalar(sqlite3.connect(target), "SELECT COUNT(*) FROM regions") == 6
    assert [p.name for p in tmp_path.iterdir()] == ["demo.sqlite"]


def test_ensure_builds_once_then_reuses(tmp_path: Path) -> None:
    first = ensure_demo_database(tmp_path)
    assert first.parent == tmp_path
    assert f"v{DEMO_SCHEMA_VERSION}" in first.name
    stamp = first.stat().st_mtime_ns
    assert ensure_demo_database(tmp_path) == first
    assert first.stat().st_mtime_ns == stamp


def test_ensure_rebuilds_a_damaged_file(tmp_path: Path) -> None:
    path = ensure_demo_database(tmp_path)
    path.write_bytes(b"truncated")
    again = ensure_demo_database(tmp_path)
    assert again == path
    assert scalar(sqlite3.connect(again), "SELECT COUNT(*) FROM orders") == 4000


def test_ensure_defaults_to_the_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ensure_demo_database().parent == tmp_path / "sqlgate"
