"""Risk before review on every engine: the planner's estimate, never the statement itself."""

from __future__ import annotations

import os
import resource
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from approvals import ApprovalItem, StatementRisk
from orchestrator.features.explain import explain
from orchestrator.features.risk import RiskAssessor
from safety import Policy, ReadOnlySettings, open_readonly_engine, read_schema, sandbox_for
from safety.sandbox import planner_sandbox

POLICY = Policy.from_toml_text(
    """
row_cap = 10

[risk]
sensitive_columns = ["customers.email"]
high_rows = 150
"""
)

ORDERS = 3000
CUSTOMERS = 20


def _fill(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(40), email VARCHAR(80))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, total INTEGER)"
        )
        conn.execute(
            sa.text("INSERT INTO customers VALUES (:i, :n, :e)"),
            [{"i": i, "n": f"c{i}", "e": f"c{i}@example.com"} for i in range(CUSTOMERS)],
        )
        conn.execute(
            sa.text("INSERT INTO orders VALUES (:i, :c, :t)"),
            [{"i": i, "c": i % CUSTOMERS, "t": i * 3} for i in range(ORDERS)],
        )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    _fill(sa.create_engine(url))
    return url


@pytest.fixture
def duckdb_url(tmp_path: Path) -> str:
    url = f"duckdb:///{tmp_path / 'shop.duckdb'}"
    engine = sa.create_engine(url)
    _fill(engine)
    engine.dispose()
    return url


@pytest.fixture
def postgres_url_filled(postgres_database: str) -> str:
    engine = sa.create_engine(postgres_database)
    _fill(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE customers")
        conn.exec_driver_sql("ANALYZE orders")
    engine.dispose()
    return postgres_database


@pytest.fixture
def mysql_url_filled(mysql_url: str) -> Iterator[str]:
    name = f"sqlgate_risk_{uuid.uuid4().hex[:10]}"
    server = sa.create_engine(mysql_url)
    with server.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = sa.make_url(mysql_url).set(database=name)
    engine = sa.create_engine(url)
    _fill(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE TABLE customers, orders")
    engine.dispose()
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with server.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        server.dispose()


ENGINES = {
    "sqlite": "sqlite_url",
    "postgres": "postgres_url_filled",
    "mysql": "mysql_url_filled",
    "duckdb": "duckdb_url",
}


@pytest.fixture(params=sorted(ENGINES))
def target(request: pytest.FixtureRequest) -> tuple[str, str]:
    dialect = request.param
    return dialect, request.getfixturevalue(ENGINES[dialect])


def _assess(url: str, dialect: str, sql: str, policy: Policy = POLICY) -> StatementRisk:
    engine = open_readonly_engine(url, ReadOnlySettings(statement_timeout_s=5))
    try:
        assessor = RiskAssessor(engine, dialect, policy, read_schema(engine))
        return assessor(ApprovalItem.new(question_id="q", question="?", sql=sql))
    finally:
        engine.dispose()


def test_a_sensitive_column_makes_a_statement_high_risk(target: tuple[str, str]) -> None:
    dialect, url = target
    risk = _assess(url, dialect, "SELECT c.name, c.email FROM customers AS c LIMIT 5")
    assert risk.level == "high"
    assert risk.sensitive_columns == ["customers.email"]
    assert risk.tables == ["customers"]
    assert risk.engine == dialect
    assert risk.estimate_error is None and risk.estimate
    assert any("sensitive customers.email" in r for r in risk.reasons)


def test_a_full_scan_past_the_row_cap_is_seen(target: tuple[str, str]) -> None:
    dialect, url = target
    risk = _assess(url, dialect, "SELECT o.total FROM orders AS o LIMIT 50")
    assert risk.full_scans == ["orders"]  # the alias is named by its table
    assert risk.sensitive_columns == []
    assert risk.row_cap == 10
    if dialect == "sqlite":  # EXPLAIN QUERY PLAN gives no row estimate
        assert risk.rows_expected is None and risk.row_cap_cuts is None
    else:
        assert risk.rows_expected == 50  # the estimate (3000 rows), bounded by the LIMIT
        assert risk.row_cap_cuts is True
        assert "the row cap will cut the result" in risk.reasons
    assert risk.level == "medium"
    assert "full scan of orders" in risk.reasons


def test_many_rows_expected_make_it_high(target: tuple[str, str]) -> None:
    dialect, url = target
    if dialect == "sqlite":
        pytest.skip("SQLite's planner gives no row estimate")
    risk = _assess(url, dialect, "SELECT o.total FROM orders AS o LIMIT 1000")
    assert risk.rows_expected is not None and risk.rows_expected >= 150
    assert risk.level == "high"


def test_an_index_lookup_under_the_cap_is_low_risk(target: tuple[str, str]) -> None:
    dialect, url = target
    if dialect == "duckdb":
        pytest.skip("DuckDB scans a small table even for a key lookup")
    risk = _assess(url, dialect, "SELECT o.total FROM orders AS o WHERE o.id = 7 LIMIT 5")
    assert risk.full_scans == []
    assert risk.row_cap_cuts is False
    assert risk.level == "low" and risk.reasons == []


def test_a_planner_error_is_reported_and_raises_the_level(target: tuple[str, str]) -> None:
    dialect, url = target
    sql = "SELECT total FROM no_such_table LIMIT 5"
    risk = _assess(url, dialect, sql, Policy())
    assert risk.estimate_error
    assert risk.level == "medium"
    assert any(r.startswith("no estimate:") for r in risk.reasons)
    # with sensitive columns named, columns that cannot be resolved count as sensitive
    assert _assess(url, dialect, sql).level == "high"


# -- EXPLAIN never runs the statement ------------------------------------------------------------


def test_sqlite_explain_does_not_run_the_statement(sqlite_url: str) -> None:
    # abs() of the smallest integer fails with "integer overflow", but only when it runs.
    sql = "SELECT abs(id - 9223372036854775807 - 1) AS v FROM orders LIMIT 5"
    engine = open_readonly_engine(sqlite_url)
    plan = explain(engine, "sqlite", sql)
    assert plan.error is None and plan.full_scans == ["orders"]
    with engine.connect() as conn, pytest.raises(sa.exc.OperationalError, match="overflow"):
        conn.exec_driver_sql(sql).fetchall()
    engine.dispose()


def _pg_calls(admin: sa.Engine) -> int:
    with admin.connect() as conn:
        conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        value = conn.exec_driver_sql(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'slow_id'"
        ).scalar()
    return int(value or 0)


def _wait_for(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_postgres_explain_does_not_run_a_slow_function(postgres_url_filled: str) -> None:
    admin = sa.create_engine(postgres_url_filled, isolation_level="AUTOCOMMIT")
    name = sa.make_url(postgres_url_filled).database
    with admin.connect() as conn:
        conn.exec_driver_sql(f"ALTER DATABASE {name} SET track_functions = 'all'")
        conn.exec_driver_sql(
            "CREATE FUNCTION slow_id(x integer) RETURNS integer VOLATILE LANGUAGE plpgsql "
            "AS $$ BEGIN PERFORM pg_sleep(0.3); RETURN x; END $$"
        )
    engine = open_readonly_engine(postgres_url_filled, ReadOnlySettings(statement_timeout_s=10))
    sql = "SELECT slow_id(o.id) FROM orders AS o LIMIT 5"
    started = time.monotonic()
    risk = RiskAssessor(engine, "postgres", POLICY, read_schema(engine))(
        ApprovalItem.new(question_id="q", question="?", sql=sql)
    )
    assert time.monotonic() - started < 1.5  # five calls would take 1.5 s
    assert risk.estimate_error is None and risk.rows_expected == 5
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
    assert _pg_calls(admin) == 0
    with engine.connect() as conn:  # the count does move when the statement runs
        conn.exec_driver_sql(sql).fetchall()
        conn.rollback()
        conn.exec_driver_sql("SELECT pg_stat_force_next_flush()")
        conn.rollback()
    assert _wait_for(lambda: _pg_calls(admin) == 5)
    engine.dispose()
    admin.dispose()


def test_postgres_explain_is_bounded_by_the_statement_timeout(postgres_url_filled: str) -> None:
    """An IMMUTABLE function with constant arguments is folded by the planner: the estimate then
    costs what the function costs, and the statement timeout stops it like any query."""
    admin = sa.create_engine(postgres_url_filled, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(
            "CREATE FUNCTION folded_slow(x integer) RETURNS integer IMMUTABLE LANGUAGE plpgsql "
            "AS $$ BEGIN PERFORM pg_sleep(3); RETURN x; END $$"
        )
    engine = open_readonly_engine(postgres_url_filled, ReadOnlySettings(statement_timeout_s=0.3))
    started = time.monotonic()
    risk = RiskAssessor(engine, "postgres", POLICY, read_schema(engine))(
        ApprovalItem.new(question_id="q", question="?", sql="SELECT folded_slow(1) AS v LIMIT 1")
    )
    assert time.monotonic() - started < 2.5
    assert risk.estimate_error and "timeout" in risk.estimate_error
    assert risk.level == "high"  # a planner stopped by a bound was handed something costly
    assert risk.reasons == [f"no estimate: {risk.estimate_error}"]
    engine.dispose()
    admin.dispose()


def test_mysql_explain_does_not_sleep(mysql_url_filled: str) -> None:
    engine = open_readonly_engine(mysql_url_filled, ReadOnlySettings(statement_timeout_s=10))
    started = time.monotonic()
    plan = explain(engine, "mysql", "SELECT SLEEP(1) AS s, o.total FROM orders AS o LIMIT 3")
    assert time.monotonic() - started < 1.0  # three rows would sleep 3 s
    assert plan.error is None and plan.rows is not None
    engine.dispose()


def test_duckdb_explain_of_an_enormous_query_returns_at_once(duckdb_url: str) -> None:
    engine = open_readonly_engine(duckdb_url, ReadOnlySettings(statement_timeout_s=10))
    started = time.monotonic()
    plan = explain(
        engine,
        "duckdb",
        "SELECT sum(a.range * b.range) AS s FROM range(1000000) AS a, range(1000000) AS b",
    )
    assert time.monotonic() - started < 2.0  # running it would take hours
    assert plan.error is None and plan.summary
    engine.dispose()


# -- precision: what is not a column is not assumed sensitive ------------------------------------

CORRELATED = (
    "SELECT c.name FROM customers AS c WHERE EXISTS "
    "(SELECT 1 FROM orders AS o WHERE o.customer_id = c.id AND o.total > 10)"
)


def test_an_outer_column_of_a_correlated_subquery_is_resolved(target: tuple[str, str]) -> None:
    dialect, url = target
    risk = _assess(url, dialect, CORRELATED)
    assert risk.level != "high"
    assert risk.sensitive_columns == []
    assert not any("not resolved" in r for r in risk.reasons)


def test_a_correlated_reference_to_a_sensitive_column_is_still_seen(
    target: tuple[str, str],
) -> None:
    dialect, url = target
    sql = (
        "SELECT c.name FROM customers AS c WHERE EXISTS "
        "(SELECT 1 FROM orders AS o WHERE o.customer_id = c.id AND c.email LIKE '%x%')"
    )
    risk = _assess(url, dialect, sql)
    assert risk.level == "high" and risk.sensitive_columns == ["customers.email"]


def test_a_sqlite_double_quoted_string_is_a_string(sqlite_url: str) -> None:
    risk = _assess(sqlite_url, "sqlite", 'SELECT count(*) FROM customers WHERE name = "c3"')
    assert risk.level != "high" and risk.sensitive_columns == []
    # a double-quoted name that is a column stays a column, and a sensitive one is seen
    risk = _assess(sqlite_url, "sqlite", 'SELECT count(*) FROM customers WHERE "email" = "x"')
    assert risk.level == "high" and risk.sensitive_columns == ["customers.email"]


def test_what_really_is_unresolved_is_still_assumed_sensitive(sqlite_url: str) -> None:
    risk = _assess(sqlite_url, "sqlite", "SELECT nosuch FROM customers LIMIT 5")
    assert risk.level == "high" and risk.sensitive_columns == ["(columns not resolved)"]


# -- the estimate is bounded like execution ------------------------------------------------------


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb"])
def test_an_embedded_plan_is_asked_in_a_worker_even_without_a_sandbox(
    dialect: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(ENGINES[dialect])
    engine = open_readonly_engine(url, ReadOnlySettings(statement_timeout_s=5, sandbox_workers=0))
    assert sandbox_for(engine) is None  # approved statements would run here, as asked
    plan = explain(engine, dialect, "SELECT total FROM orders LIMIT 5")
    assert plan.error is None and plan.full_scans == ["orders"]
    assert planner_sandbox(engine).pids  # but the plan was asked in a worker process
    assert os.getpid() not in planner_sandbox(engine).pids
    engine.dispose()


def test_a_plan_on_an_engine_of_another_maker_is_asked_in_a_worker(sqlite_url: str) -> None:
    engine = sa.create_engine(sqlite_url)  # not read-only, no bounds of its own
    plan = explain(engine, "sqlite", "SELECT total FROM orders LIMIT 5")
    assert plan.error is None and plan.full_scans == ["orders"]
    assert planner_sandbox(engine).pids
    engine.dispose()


def test_duckdb_constant_folding_costs_this_process_nothing(duckdb_url: str) -> None:
    """DuckDB folds constants while planning: in this process ``EXPLAIN`` of the list below
    took 13 s and 3.4 GB. In the worker it is stopped at its bounds, and stopped is high."""
    timeout = 0.5
    engine = open_readonly_engine(duckdb_url, ReadOnlySettings(statement_timeout_s=timeout))
    planner_sandbox(engine).run("SELECT 1", row_cap=1)  # warm: the worker's start is not timed
    before = _peak_rss()
    started = time.monotonic()
    risk = RiskAssessor(engine, "duckdb", Policy(), read_schema(engine))(
        ApprovalItem.new(
            question_id="q",
            question="?",
            sql="SELECT len(range(40000000)) AS n, regexp_matches(repeat('a', 200000000), "
            "'(a|aa)*b') AS m FROM customers LIMIT 5",
        )
    )
    assert time.monotonic() - started < 2 * timeout + 2.0  # the worker is killed past the grace
    assert _peak_rss() - before < 100 * 1024 * 1024
    assert risk.estimate_error and "stopped" in risk.estimate_error
    assert risk.level == "high"
    assert risk.reasons == [f"no estimate: {risk.estimate_error}"]
    engine.dispose()


def test_mysql_explain_is_bounded_by_the_statement_time_limit(mysql_url_filled: str) -> None:
    """MariaDB evaluates a constant condition while optimising; its statement time limit
    stops it like any query."""
    engine = open_readonly_engine(mysql_url_filled, ReadOnlySettings(statement_timeout_s=0.5))
    started = time.monotonic()
    plan = explain(
        engine, "mysql", "SELECT o.total FROM orders AS o WHERE BENCHMARK(500000000, md5('x')) = 0"
    )
    assert time.monotonic() - started < 2.0  # the benchmark alone takes a minute
    assert plan.error is None or plan.stopped, plan.error
    engine.dispose()
