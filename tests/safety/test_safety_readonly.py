"""Read-only engines still do their job: reads, schema inspection, timeouts with an injected clock."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa
from safety_backends import MAKERS, TickingClock, drop

from safety import (
    ReadOnlySettings,
    ReadOnlySetupError,
    UnsupportedDialect,
    is_statement_timeout,
    open_readonly_engine,
)
from safety.readonly import sqlite_authorizer


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    made: dict = {}
    yield (
        lambda dialect: (
            made.get(dialect)
            or made.setdefault(dialect, MAKERS[dialect](tmp_path_factory.mktemp(dialect)))
        )
    )
    for backend in made.values():
        drop(backend)


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", "postgres", "mysql"])
def test_reads_and_inspection_work(backends, dialect):
    backend = backends(dialect)
    with backend.owner.connect() as conn:
        rows = conn.exec_driver_sql(f"SELECT a, b FROM {backend.table} ORDER BY a").fetchall()
        assert [tuple(r) for r in rows] == [(1, "one"), (2, "two"), (3, "three")]
        inspector = sa.inspect(conn)
        assert backend.table in inspector.get_table_names()
        if (
            dialect != "duckdb"
        ):  # duckdb-engine's get_columns fails on SQLAlchemy 2.1 with any engine
            assert [c["name"] for c in inspector.get_columns(backend.table)] == ["a", "b"]


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", "postgres", "mysql"])
def test_many_statements_in_a_row_stay_read_only(backends, dialect):
    backend = backends(dialect)
    with backend.owner.connect() as conn:
        for _ in range(3):
            assert conn.exec_driver_sql(f"SELECT COUNT(*) FROM {backend.table}").scalar() == 3
        with pytest.raises(sa.exc.DBAPIError):
            conn.exec_driver_sql(f"DELETE FROM {backend.table}")


def test_postgres_commit_inside_a_connection_does_not_reopen_writes(backends):
    backend = backends("postgres")
    with backend.owner.connect() as conn:
        conn.exec_driver_sql("SET default_transaction_read_only = off")
        conn.exec_driver_sql("COMMIT")
        with pytest.raises(sa.exc.DBAPIError, match="read-only"):
            conn.exec_driver_sql(f"DELETE FROM {backend.table}")


def test_mysql_read_write_session_does_not_reopen_writes(backends):
    backend = backends("mysql")
    with backend.owner.connect() as conn:
        conn.exec_driver_sql("SET SESSION TRANSACTION READ WRITE")
        conn.exec_driver_sql("COMMIT")
        with pytest.raises(sa.exc.DBAPIError, match="READ ONLY"):
            conn.exec_driver_sql(f"DROP TABLE {backend.table}")


def test_sqlite_deadline_uses_the_injected_clock(tmp_path):
    path = tmp_path / "t.db"
    sqlite3.connect(path).close()
    clock = TickingClock(step=1.0)
    engine = open_readonly_engine(
        f"sqlite:///{path}", ReadOnlySettings(statement_timeout_s=5.0), clock=clock
    )
    endless = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
    with engine.connect() as conn:
        with pytest.raises(sa.exc.OperationalError) as info:
            conn.exec_driver_sql(endless).fetchall()
    assert is_statement_timeout(info.value)
    assert clock.now <= 10.0  # interrupted at the first check past the deadline


def test_sqlite_new_statement_gets_a_fresh_deadline(tmp_path):
    path = tmp_path / "t.db"
    sqlite3.connect(path).close()
    engine = open_readonly_engine(
        f"sqlite:///{path}", ReadOnlySettings(statement_timeout_s=3.0), clock=TickingClock(1.0)
    )
    with engine.connect() as conn:
        for _ in range(5):
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1


def test_sqlite_in_memory_is_refused():
    with pytest.raises(ReadOnlySetupError) as info:
        open_readonly_engine("sqlite://")
    assert info.value.code == "readonly_setup_failed"


def test_duckdb_in_memory_is_refused():
    with pytest.raises(ReadOnlySetupError):
        open_readonly_engine("duckdb:///:memory:")


def test_postgres_needs_psycopg3():
    with pytest.raises(ReadOnlySetupError):
        open_readonly_engine("postgresql+psycopg2://u@127.0.0.1/db")


def test_unknown_database_is_refused():
    with pytest.raises(UnsupportedDialect):
        open_readonly_engine("oracle://u@h/db")


@pytest.mark.parametrize(
    ("action", "arg1", "arg2", "allowed"),
    [
        (sqlite3.SQLITE_SELECT, None, None, True),
        (sqlite3.SQLITE_READ, "t", "a", True),
        (sqlite3.SQLITE_FUNCTION, None, "upper", True),
        (sqlite3.SQLITE_FUNCTION, None, "load_extension", False),
        (sqlite3.SQLITE_PRAGMA, "table_info", "t", True),
        (sqlite3.SQLITE_PRAGMA, "query_only", "0", False),
        (sqlite3.SQLITE_PRAGMA, "read_uncommitted", None, True),
        (sqlite3.SQLITE_PRAGMA, "read_uncommitted", "1", False),
        (sqlite3.SQLITE_ATTACH, "/tmp/x.db", None, False),
        (sqlite3.SQLITE_INSERT, "t", None, False),
        (sqlite3.SQLITE_DELETE, "t", None, False),
        (sqlite3.SQLITE_CREATE_TABLE, "t", None, False),
    ],
)
def test_sqlite_authorizer(action, arg1, arg2, allowed):
    assert (sqlite_authorizer(action, arg1, arg2, "main", None) == sqlite3.SQLITE_OK) is allowed


def test_postgres_role_setting_drops_superuser_rights(backends):
    import os

    from safety_backends import POSTGRES_ENV, READER

    backend = backends("postgres")
    engine = open_readonly_engine(
        os.environ[POSTGRES_ENV], ReadOnlySettings(statement_timeout_s=2.0, postgres_role=READER)
    )
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT current_user").scalar() == READER
        assert conn.exec_driver_sql(f"SELECT COUNT(*) FROM {backend.table}").scalar() == 3
        with pytest.raises(sa.exc.DBAPIError, match="permission denied"):
            conn.exec_driver_sql("SELECT pg_read_file('/etc/passwd')")
    engine.dispose()


def test_role_name_is_an_identifier():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ReadOnlySettings(postgres_role='x"; DROP TABLE t; --')
