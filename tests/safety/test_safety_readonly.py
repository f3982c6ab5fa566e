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


# --- cost bounds on the servers, the dialect's quoting, the role's rights --------------------


def test_postgres_transactions_carry_work_mem_and_the_timeout(backends):
    backend = backends("postgres")
    with backend.owner.connect() as conn:
        assert conn.exec_driver_sql("SHOW work_mem").scalar() == "32MB"
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "500ms"
        assert conn.exec_driver_sql("SHOW transaction_read_only").scalar() == "on"
        with pytest.raises(sa.exc.OperationalError) as info:
            conn.exec_driver_sql("SELECT pg_sleep(3)")
    assert is_statement_timeout(info.value)


def test_postgres_temp_file_limit_where_the_role_may_set_it(backends, caplog):
    import logging
    import os

    from safety_backends import POSTGRES_ENV, READER

    backend = backends("postgres")
    with backend.admin.connect() as conn:
        superuser = conn.exec_driver_sql(
            "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
        ).scalar()
    settings = ReadOnlySettings(statement_timeout_s=2.0, postgres_temp_file_limit="64MB")
    if superuser:
        engine = open_readonly_engine(os.environ[POSTGRES_ENV], settings)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW temp_file_limit").scalar() == "64MB"
        engine.dispose()
    reader_url = sa.make_url(os.environ[POSTGRES_ENV]).set(username=READER, password=None)
    engine = open_readonly_engine(reader_url.render_as_string(hide_password=False), settings)
    with caplog.at_level(logging.WARNING, logger="safety.readonly"):
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW temp_file_limit").scalar() != "64MB"
            assert conn.exec_driver_sql("SHOW work_mem").scalar() == "32MB"
            assert conn.exec_driver_sql(f"SELECT COUNT(*) FROM {backend.table}").scalar() == 3
    assert "temp_file_limit not applied" in caplog.text
    engine.dispose()


def test_mysql_session_mode_and_temporary_table_bound(backends):
    from safety.readonly import MYSQL_SQL_MODE

    backend = backends("mysql")
    with backend.owner.connect() as conn:
        mode, tmp, heap = conn.exec_driver_sql(
            "SELECT @@SESSION.sql_mode, @@SESSION.tmp_table_size, @@SESSION.max_heap_table_size"
        ).one()
    assert mode == MYSQL_SQL_MODE
    assert tmp == heap == ReadOnlySettings().mysql_tmp_table_bytes


LITERALS = [
    "x\\",
    "\\",
    "it's",
    "\\'",
    "'\\''",
    'say "hi"',
    "line\nbreak\ttab\r",
    "100% _done_ \\% \\_",
    "back\\slash\\\\twice",
    "' OR 1=1 -- ",
    "\\' UNION SELECT LOAD_FILE('/etc/passwd') -- ",
    "é ü 字 🙂",
]


def _round_trip(engine, values):
    import sqlglot
    from sqlglot import exp

    from agents.sql_executor import SQLExecutor
    from safety import SqlValidator

    select = exp.select(*(exp.Literal.string(v).as_(f"c{i}") for i, v in enumerate(values)))
    checked = SqlValidator(dialect="mysql").validate(select.sql("mysql"))
    assert checked.ok, checked.refusal
    tree = sqlglot.parse_one(checked.sql, read="mysql")
    seen = [lit.this for lit in tree.find_all(exp.Literal) if lit.is_string]
    assert seen == list(values)  # what the validator saw
    result = SQLExecutor(engine).run(checked)
    assert result.columns == [f"c{i}" for i in range(len(values))]  # no literal ended early
    return result.rows


def test_mysql_string_literals_round_trip_to_the_validated_value(backends):
    backend = backends("mysql")
    assert _round_trip(backend.owner, LITERALS) == [LITERALS]


def test_mysql_literals_survive_a_server_default_that_reads_quotes_otherwise(backends):
    """A server configured with NO_BACKSLASH_ESCAPES and ANSI_QUOTES would read sqlglot's
    rendering differently; the pinned session mode wins."""
    import os

    from safety_backends import MYSQL_ENV

    backends("mysql")  # skips with its reason when no server is configured
    engine = open_readonly_engine(os.environ[MYSQL_ENV], ReadOnlySettings(statement_timeout_s=2.0))

    @sa.event.listens_for(engine, "connect")
    def _hostile_default(dbapi_connection, record):
        with dbapi_connection.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES,ANSI_QUOTES,PIPES_AS_CONCAT'")

    try:
        assert _round_trip(engine, LITERALS) == [LITERALS]
    finally:
        engine.dispose()


def test_mysql_any_text_round_trips(backends):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    backend = backends("mysql")
    alphabet = st.sampled_from(list("ab'\"\\%_;-/*#\n\r\t `") + ["é", "字"])

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(st.lists(st.text(alphabet, max_size=12), min_size=1, max_size=4))
    def check(values):
        assert _round_trip(backend.owner, values) == [values]

    check()


def test_sqlite_regexp_is_re2_not_pythons_re(tmp_path):
    import time

    path = tmp_path / "r.db"
    sqlite3.connect(path).close()
    engine = open_readonly_engine(f"sqlite:///{path}", ReadOnlySettings(sandbox_workers=0))
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 'abc' REGEXP 'b+c$'").scalar() == 1
        started = time.monotonic()
        evil = "SELECT ('a' || printf('%.*c', 100000, 'a') || 'b') REGEXP '(a+)+$'"
        assert conn.exec_driver_sql(evil).scalar() == 0
        assert time.monotonic() - started < 1.0  # Python's re takes minutes here
        with pytest.raises(sa.exc.OperationalError):  # lookahead: Python re has it, RE2 does not
            conn.exec_driver_sql("SELECT 'ab' REGEXP 'a(?=b)'").scalar()
        with pytest.raises(sa.exc.OperationalError):
            conn.exec_driver_sql(f"SELECT 'a' REGEXP '{'a' * 2000}'").scalar()
    engine.dispose()


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb"])
def test_embedded_files_need_no_privilege_check(backends, dialect):
    from safety import check_privileges

    assert check_privileges(backends(dialect).owner) == []


def test_privilege_check_names_what_a_role_has_beyond_reading(backends):
    from safety import check_privileges

    for dialect in ("postgres", "mysql"):
        backend = backends(dialect)
        assert check_privileges(backend.engine("reader")) == []
        with backend.admin.connect() as conn:
            if dialect == "postgres":
                mighty = conn.exec_driver_sql(
                    "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                ).scalar()
            else:
                grants = " ".join(r[0] for r in conn.exec_driver_sql("SHOW GRANTS").fetchall())
                mighty = "ALL PRIVILEGES ON *.*" in grants or "FILE" in grants
        if not mighty:
            continue
        text = " | ".join(check_privileges(backend.owner))
        assert ("superuser" in text) if dialect == "postgres" else ("FILE privilege" in text)


def test_grant_lines_are_read_per_scope():
    from safety.privileges import mysql_grant_warnings

    assert mysql_grant_warnings(["GRANT SELECT ON `shop`.* TO `r`@`%`"]) == []
    assert mysql_grant_warnings(["GRANT USAGE ON *.* TO `r`@`%`"]) == []
    file_and_write = mysql_grant_warnings(
        ["GRANT FILE ON *.* TO `r`@`%`", "GRANT SELECT, INSERT ON `shop`.* TO `r`@`%`"]
    )
    assert len(file_and_write) == 2
    assert "FILE privilege" in file_and_write[0]
    assert "not read-only: it has INSERT on `shop`.*" in file_and_write[1]
    scoped_all = mysql_grant_warnings(["GRANT ALL PRIVILEGES ON `shop`.* TO `r`@`%`"])
    assert len(scoped_all) == 1 and "FILE" not in scoped_all[0]
    assert any("SUPER" in w for w in mysql_grant_warnings(["GRANT SUPER ON *.* TO `r`@`%`"]))
