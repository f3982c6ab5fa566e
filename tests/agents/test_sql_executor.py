import datetime as dt
import decimal
import json
import os
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.errors import AgentError, ExecutionError
from agents.sql_executor import ExecutionResult, SQLExecutor, clean_message, json_safe
from safety import StatementTimeout, is_statement_timeout
from safety.statement import (
    _minted as unchecked,  # the database's own walls, tested apart from the validator
)


def ran(
    executor: SQLExecutor, sql: object, dialect: str | None = None, **kwargs: object
) -> ExecutionResult:
    """Run text unchecked in the executor's own dialect (or ``dialect``): these tests are about
    execution; a validator result is passed on as it is."""
    if isinstance(sql, str):
        sql = unchecked(sql, dialect or executor.dialect, None)
    return executor.run(sql, **kwargs)  # type: ignore[arg-type]


LONG_SQLITE_QUERY = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) "
    "SELECT COUNT(*) FROM n"
)


def test_runs_a_query_and_returns_rows(demo_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(demo_engine),
        "SELECT region_id, name FROM regions WHERE country = 'Canada' ORDER BY region_id",
    )
    assert res.columns == ["region_id", "name"]
    assert res.rows == [[6, "Canada"]]
    assert res.row_count == 1
    assert res.truncated is False
    assert res.row_cap == 1000
    assert res.duration_s >= 0


def test_row_cap_keeps_cap_rows_and_flags_truncation(demo_engine: sa.Engine) -> None:
    capped = ran(
        SQLExecutor(demo_engine, row_cap=50),
        "SELECT customer_id FROM customers ORDER BY customer_id",
    )
    assert capped.row_count == 50
    assert capped.rows[-1] == [50]
    assert capped.truncated is True
    assert capped.summary().endswith("truncated at 50")
    exact = ran(SQLExecutor(demo_engine, row_cap=6), "SELECT region_id FROM regions")
    assert exact.row_count == 6
    assert exact.truncated is False


def test_row_cap_must_be_positive(demo_engine: sa.Engine) -> None:
    with pytest.raises(ValueError):
        SQLExecutor(demo_engine, row_cap=0)


def test_empty_result_keeps_its_columns(demo_engine: sa.Engine) -> None:
    res = ran(SQLExecutor(demo_engine), "SELECT order_id, status FROM orders WHERE 1 = 0")
    assert res.columns == ["order_id", "status"]
    assert res.rows == []
    assert res.row_count == 0


def test_colons_and_percent_signs_in_literals_reach_the_driver_untouched(
    shop_engine: sa.Engine,
) -> None:
    res = ran(
        SQLExecutor(shop_engine),
        "SELECT ':name' AS a, '100%' AS b, note FROM purchase WHERE note LIKE 'first:%'",
    )
    assert res.rows == [[":name", "100%", "first: 100% paid"]]


def test_values_are_json_safe_on_every_backend(shop_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(shop_engine),
        "SELECT purchase_id, amount, created FROM purchase ORDER BY purchase_id",
    )
    json.dumps(res.model_dump())
    first = res.rows[0]
    assert first[0] == 1
    assert first[1] == 12.5
    assert first[2] == "2025-01-31"
    assert res.rows[2][1] == 5  # 5.00 has no fractional part


def test_result_round_trips_through_json(demo_engine: sa.Engine) -> None:
    res = ran(
        SQLExecutor(demo_engine, row_cap=3),
        "SELECT order_id, order_date, status FROM orders ORDER BY order_id",
    )
    assert ExecutionResult.model_validate_json(res.model_dump_json()) == res


def test_duration_comes_from_the_injected_clock(demo_engine: sa.Engine) -> None:
    ticks = iter([100.0, 100.25])
    res = ran(SQLExecutor(demo_engine, clock=lambda: next(ticks)), "SELECT 1")
    assert res.duration_s == 0.25
    assert res.summary() == "1 rows x 1 columns in 0.250 s"


def test_statement_without_rows(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    res = ran(SQLExecutor(engine), "PRAGMA foreign_keys = ON")
    assert (res.columns, res.rows, res.row_count) == ([], [], 0)


def test_errors_are_one_line_with_a_stable_code(demo_engine: sa.Engine) -> None:
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(demo_engine), "SELECT no_such_column FROM orders")
    err = info.value
    assert isinstance(err, AgentError)
    assert err.code == "execution_error"
    assert err.timed_out is False
    assert err.message == "no such column: no_such_column"
    assert str(err) == err.message


def test_more_than_one_statement_is_an_execution_error(demo_engine: sa.Engine) -> None:
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(demo_engine), "SELECT 1; SELECT 2")
    assert info.value.code == "execution_error"


def test_postgres_error_message_drops_the_caret_line(postgres_engine: sa.Engine) -> None:
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(postgres_engine), "SELECT nosuch FROM purchase")
    assert info.value.code == "execution_error"
    assert "\n" not in info.value.message
    # Rows are read through a server-side cursor; its DECLARE wrapper is not shown.
    assert info.value.message.startswith('column "nosuch" does not exist LINE 1: SELECT nosuch')
    assert "^" not in info.value.message and "DECLARE" not in info.value.message


def test_sqlite_interrupt_is_a_statement_timeout(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")

    @sa.event.listens_for(engine, "connect")
    def _interrupt_long_statements(dbapi_connection, _record):  # what a timeout handler does
        dbapi_connection.set_progress_handler(lambda: 1, 100_000)

    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(engine), LONG_SQLITE_QUERY)
    assert info.value.code == "statement_timeout"
    assert info.value.timed_out is True
    assert info.value.message == "interrupted"


def test_postgres_statement_timeout(postgres_engine: sa.Engine) -> None:
    engine = sa.create_engine(
        postgres_engine.url, connect_args={"options": "-c statement_timeout=100"}
    )
    try:
        with pytest.raises(ExecutionError) as info:
            ran(SQLExecutor(engine), "SELECT pg_sleep(2)")
    finally:
        engine.dispose()
    assert info.value.code == "statement_timeout"
    assert info.value.timed_out is True
    assert info.value.message == "canceling statement due to statement timeout"


def test_mysql_statement_timeout(mysql_engine: sa.Engine) -> None:
    engine = sa.create_engine(mysql_engine.url)
    with engine.connect() as conn:
        is_mariadb = "mariadb" in str(conn.exec_driver_sql("SELECT VERSION()").scalar()).lower()

    @sa.event.listens_for(engine, "connect")
    def _limit(dbapi_connection, _record):
        with dbapi_connection.cursor() as cur:
            cur.execute(
                "SET SESSION max_statement_time = 0.1"
                if is_mariadb
                else "SET SESSION max_execution_time = 100"
            )

    engine.dispose()
    try:
        with pytest.raises(ExecutionError) as info:
            ran(
                SQLExecutor(engine),
                "SELECT COUNT(*) FROM information_schema.columns a, information_schema.columns b,"
                " information_schema.columns c",
            )
    finally:
        engine.dispose()
    assert info.value.code == "statement_timeout"
    assert info.value.message.startswith("Query execution was interrupted")
    assert info.value.message.endswith(")")


def test_mysql_errors_read_as_message_then_number(mysql_engine: sa.Engine) -> None:
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(mysql_engine), "SELECT nosuch FROM purchase")
    # MariaDB says 'SELECT', MySQL 'field list'
    assert info.value.message.startswith("Unknown column 'nosuch' in ")
    assert info.value.message.endswith(" (error 1054)")


def test_through_a_read_only_engine(demo_path: Path) -> None:
    from safety import ReadOnlySettings, open_readonly_engine

    engine = open_readonly_engine(
        f"sqlite:///{demo_path}", ReadOnlySettings(statement_timeout_s=0.2)
    )
    try:
        executor = SQLExecutor(engine, row_cap=5)
        assert ran(executor, "SELECT COUNT(*) AS n FROM orders").rows == [[4000]]
        with pytest.raises(ExecutionError) as info:
            ran(executor, LONG_SQLITE_QUERY)
        assert (info.value.code, info.value.timed_out) == ("statement_timeout", True)
        with pytest.raises(ExecutionError) as info:
            ran(executor, "DELETE FROM orders")
        assert info.value.code == "execution_error"
        assert ran(executor, "SELECT COUNT(*) FROM orders").rows == [[4000]]
    finally:
        engine.dispose()


def test_duckdb_interrupt_is_a_statement_timeout(tmp_path: Path) -> None:
    engine = sa.create_engine("duckdb:///:memory:", poolclass=sa.pool.StaticPool)
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
    timer = threading.Timer(0.3, raw.interrupt)
    timer.start()
    try:
        with pytest.raises(ExecutionError) as info:
            ran(SQLExecutor(engine), "SELECT SUM(i) FROM range(100000000000) t(i)")
    finally:
        timer.cancel()
        engine.dispose()
    assert info.value.code == "statement_timeout"


def test_unreachable_sqlite_file(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'x.sqlite'}")
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(engine), "SELECT 1")
    assert info.value.code == "database_unreachable"
    assert info.value.timed_out is False


def test_unreachable_postgres_server() -> None:
    if not os.environ.get("SQLGATE_TEST_POSTGRES_URL"):
        pytest.skip("SQLGATE_TEST_POSTGRES_URL is not set")
    # a closed port on this machine: the connection is refused at once
    engine = sa.create_engine(
        "postgresql+psycopg://nobody@127.0.0.1:9/none", connect_args={"connect_timeout": 2}
    )
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(engine), "SELECT 1")
    assert info.value.code == "database_unreachable"
    assert "\n" not in info.value.message
    assert "Connection refused" in info.value.message


def test_json_safe_values() -> None:
    assert json_safe(decimal.Decimal("12.50")) == 12.5
    assert json_safe(decimal.Decimal("7.000")) == 7
    assert (
        json_safe(decimal.Decimal("12345678901234567890.123456789"))
        == "12345678901234567890.123456789"
    )
    assert json_safe(decimal.Decimal("NaN")) == "NaN"
    assert json_safe(float("inf")) == "inf"
    assert json_safe(dt.datetime(2025, 1, 2, 3, 4, 5)) == "2025-01-02T03:04:05"
    assert json_safe(dt.date(2025, 1, 2)) == "2025-01-02"
    assert json_safe(dt.time(13, 30)) == "13:30:00"
    assert json_safe(dt.timedelta(days=1, hours=2)) == "1 day, 2:00:00"
    assert json_safe(b"\x00\xff") == "00ff"
    assert json_safe(memoryview(b"ab")) == "6162"
    assert json_safe(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert json_safe({"a": [decimal.Decimal("1.5"), (dt.date(2025, 1, 1),)]}) == {
        "a": [1.5, ["2025-01-01"]]
    }
    assert json_safe(True) is True
    assert json_safe(None) is None


def test_clean_message_and_timeout_detection_on_plain_exceptions() -> None:
    assert clean_message(ValueError("one\n  two\n   ^^^\n\nthree")) == "one two three"
    assert clean_message(ValueError("")) == "ValueError"
    assert len(clean_message(ValueError("x" * 5000))) == 1000
    assert is_statement_timeout(StatementTimeout("slow"))
    assert not is_statement_timeout(RuntimeError("syntax error"))


# --- the dialect is the engine's -------------------------------------------------------------


def test_executor_knows_its_engines_dialect(tmp_path: Path) -> None:
    assert SQLExecutor(sa.create_engine(f"sqlite:///{tmp_path / 'x.db'}")).dialect == "sqlite"
    assert SQLExecutor(sa.create_engine("duckdb:///:memory:")).dialect == "duckdb"
    assert SQLExecutor(sa.create_engine("mariadb+pymysql://u@127.0.0.1/x")).dialect == "mysql"
    assert SQLExecutor(sa.create_engine("postgresql+psycopg://u@127.0.0.1/x")).dialect == "postgres"


def test_dialect_mismatch_is_refused_before_touching_the_database(tmp_path: Path) -> None:
    # The file's folder does not exist: any attempt to connect would be database_unreachable.
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'x.sqlite'}")
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(engine), "SELECT 'x\\' AS a", dialect="mysql")
    assert info.value.code == "dialect_mismatch"
    assert info.value.timed_out is False
    assert "validated as mysql" in info.value.message
    assert "Nothing was run" in info.value.message


def test_a_validation_result_carries_its_dialect(demo_engine: sa.Engine) -> None:
    from safety import SqlValidator

    executor = SQLExecutor(demo_engine)
    checked = SqlValidator(dialect="sqlite").validate("SELECT COUNT(*) AS n FROM regions")
    assert executor.run(checked).rows == [[6]]
    elsewhere = SqlValidator(dialect="postgres").validate("SELECT COUNT(*) AS n FROM regions")
    with pytest.raises(ExecutionError) as info:
        executor.run(elsewhere)
    assert info.value.code == "dialect_mismatch"
    refused = SqlValidator(dialect="sqlite").validate("DELETE FROM regions")
    with pytest.raises(ExecutionError) as info:
        ran(executor, refused)
    assert info.value.code == "refused_statement"


def test_mysql_engine_refuses_sql_checked_as_postgres(mysql_engine: sa.Engine) -> None:
    """A backslash ends a PostgreSQL literal but escapes the quote on MariaDB: text the validator
    saw as a string would run as SQL. The executor refuses it before it reaches the server."""
    from safety import SqlValidator

    attack = "SELECT 'x\\' AS a, ' UNION SELECT LOAD_FILE(''/etc/passwd'') -- ' AS b"
    checked = SqlValidator(dialect="postgres").validate(attack)
    assert checked.ok
    with pytest.raises(ExecutionError) as info:
        ran(SQLExecutor(mysql_engine), checked)
    assert info.value.code == "dialect_mismatch"


# --- truthful row caps, through the sandbox too ----------------------------------------------


@pytest.mark.parametrize("sandboxed", [False, True])
def test_truncated_is_true_exactly_when_the_cap_cut_rows(demo_path: Path, sandboxed: bool) -> None:
    from safety import ReadOnlySettings, open_readonly_engine

    settings = ReadOnlySettings(sandbox_workers=1 if sandboxed else 0)
    engine = open_readonly_engine(f"sqlite:///{demo_path}", settings)
    try:
        six = "SELECT region_id FROM regions ORDER BY region_id"
        at_cap = SQLExecutor(engine, row_cap=6)
        assert (at_cap.sandbox is not None) is sandboxed
        exact = ran(at_cap, six)
        assert (exact.row_count, exact.truncated) == (6, False)
        cut = ran(SQLExecutor(engine, row_cap=5), six, dialect="sqlite")
        assert (cut.row_count, cut.truncated, cut.rows[-1]) == (5, True, [5])
    finally:
        if at_cap.sandbox is not None:
            at_cap.sandbox.close()
        engine.dispose()


def test_sandboxed_values_are_json_safe(tmp_path: Path) -> None:
    import duckdb

    from safety import ReadOnlySettings, open_readonly_engine

    path = tmp_path / "v.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute(
        "CREATE TABLE v AS SELECT 12.50::DECIMAL(10,2) AS d, DATE '2025-01-31' AS day,"
        " [1, 2] AS l, {'k': 'v'} AS s, INTERVAL 1 DAY AS i, 'ab'::BLOB AS b"
    )
    conn.close()
    engine = open_readonly_engine(f"duckdb:///{path}", ReadOnlySettings(sandbox_workers=1))
    executor = SQLExecutor(engine)
    try:
        res = ran(executor, "SELECT * FROM v", dialect="duckdb")
    finally:
        assert executor.sandbox is not None
        executor.sandbox.close()
        engine.dispose()
    json.dumps(res.model_dump())
    assert res.rows == [[12.5, "2025-01-31", [1, 2], {"k": "v"}, "1 day, 0:00:00", "6162"]]


def test_a_statement_stopped_for_memory_is_a_resource_limit(tmp_path: Path) -> None:
    import duckdb

    from safety import ReadOnlySettings, open_readonly_engine

    path = tmp_path / "m.duckdb"
    duckdb.connect(str(path)).close()
    settings = ReadOnlySettings(sandbox_workers=1, worker_memory_bytes=256 * 1024 * 1024)
    engine = open_readonly_engine(f"duckdb:///{path}", settings)
    executor = SQLExecutor(engine)
    try:
        with pytest.raises(ExecutionError) as info:
            ran(executor, "SELECT list_sum(range(300000000))", dialect="duckdb")
    finally:
        assert executor.sandbox is not None
        executor.sandbox.close()
        engine.dispose()
    assert (info.value.code, info.value.timed_out) == ("resource_limit", True)
    assert info.value.message.startswith("the statement was stopped for its cost: Out of Memory")


class TestOnlyCheckedStatementsRun:
    """SQL text without the dialect it was validated in never reaches the database."""

    @pytest.mark.parametrize(
        "sql", ["SELECT 1", "SELECT LOAD_FILE('/etc/passwd')", "SELECT 'x\\' AS a"]
    )
    def test_bare_text_is_refused_before_touching_the_database(
        self, tmp_path: Path, sql: str
    ) -> None:
        # The file does not exist: a connection attempt would fail with database_unreachable.
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'x.sqlite'}")
        with pytest.raises(ExecutionError) as caught:
            SQLExecutor(engine).run(sql)
        assert caught.value.code == "unchecked_statement"
        assert "Nothing was run" in caught.value.message

    def test_the_validators_result_runs(self, demo_engine: sa.Engine) -> None:
        from safety import SqlValidator

        checked = SqlValidator("sqlite").validate("SELECT COUNT(*) AS n FROM regions")
        assert SQLExecutor(demo_engine).run(checked).rows == [[6]]
