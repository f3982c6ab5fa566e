"""Allowlist bypasses by syntax x SQLite, DuckDB, PostgreSQL, MariaDB/MySQL.

A policy allows one table and denies its column ``b`` (values ``one``, ``two``, ``three``); a
table of the same name in another schema holds ``hidden``. The schema is read from the database
with ``safety.read_schema``, as an entry point would. Each attack is shown twice: the
validator, given the schema read from the real database, refuses it; and the engine, with the
validator switched off, shows what would happen: it leaks a protected value (``leak``), reads a
catalog or setting (``rows``), fails (``error``), or runs without leaking (``harmless``). Where
the engine leaks, the validator is the wall, and this test proves it holds.
"""

from __future__ import annotations

import os
import re
import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from safety_backends import MYSQL_ENV, POSTGRES_ENV
from sqlalchemy.engine import make_url

from safety import ReadOnlySettings, SafetyPolicy, SqlValidator, open_readonly_engine, read_schema

LEAK = re.compile(r"\b(one|two|three|hidden)\b")  # the protected values, whole words


@dataclass
class Target:
    dialect: str
    engine: sa.Engine
    table: str
    other: str  # the other schema holding a table of the same name
    default_schema: str
    schema: dict[str, list[str]]
    cleanup: list[str]
    admin: sa.Engine | None = None

    def validator(self) -> SqlValidator:
        policy = SafetyPolicy(allowed_tables=(self.table,), denied_columns=(f"{self.table}.b",))
        return SqlValidator(
            self.dialect, policy, schema=self.schema, default_schema=self.default_schema
        )


def _victim(conn, table: str, values: tuple[str, ...]) -> None:
    conn.exec_driver_sql(f"CREATE TABLE {table} (a INTEGER, b VARCHAR(20))")
    rows = ", ".join(f"({i}, '{v}')" for i, v in enumerate(values, 1))
    conn.exec_driver_sql(f"INSERT INTO {table} (a, b) VALUES {rows}")


def make_sqlite(tmp: Path) -> Target:
    path = tmp / "victim.db"
    table = f"sg_res_{uuid.uuid4().hex[:8]}"
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table} (a INTEGER, b VARCHAR(20))")
        conn.execute(f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    engine = open_readonly_engine(f"sqlite:///{path}")
    found = read_schema(engine)
    assert found.default_schema == "main" and found.tables == {f"main.{table}": ["a", "b"]}
    return Target("sqlite", engine, table, "temp", "main", found.tables, [])


def make_duckdb(tmp: Path) -> Target:
    import duckdb

    path = tmp / "victim.duckdb"
    table = f"sg_res_{uuid.uuid4().hex[:8]}"
    conn = duckdb.connect(str(path))
    conn.execute(f"CREATE TABLE {table} (a INTEGER, b VARCHAR(20))")
    conn.execute(f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    conn.execute("CREATE SCHEMA other")
    conn.execute(f"CREATE TABLE other.{table} (a INTEGER, b VARCHAR(20))")
    conn.execute(f"INSERT INTO other.{table} VALUES (1, 'hidden')")
    conn.close()
    engine = open_readonly_engine(f"duckdb:///{path}", ReadOnlySettings(statement_timeout_s=5))
    found = read_schema(engine)
    assert found.default_schema == "main"
    schema = found.tables
    assert schema == {f"main.{table}": ["a", "b"], f"other.{table}": ["a", "b"]}
    return Target("duckdb", engine, table, "other", "main", schema, [])


def make_postgres(tmp: Path) -> Target:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server")
    admin = sa.create_engine(url)
    table = f"sg_res_{uuid.uuid4().hex[:8]}"
    other = f"sg_other_{uuid.uuid4().hex[:8]}"
    with admin.begin() as conn:
        _victim(conn, table, ("one", "two", "three"))
        conn.exec_driver_sql(f"CREATE SCHEMA {other}")
        _victim(conn, f"{other}.{table}", ("hidden",))
    engine = open_readonly_engine(url, ReadOnlySettings(statement_timeout_s=5))
    found = read_schema(engine)
    assert found.default_schema == "public"
    schema = {k: v for k, v in found.tables.items() if k.endswith(table)}
    assert schema == {f"public.{table}": ["a", "b"], f"{other}.{table}": ["a", "b"]}
    cleanup = [f"DROP TABLE IF EXISTS {table}", f"DROP SCHEMA IF EXISTS {other} CASCADE"]
    return Target("postgres", engine, table, other, "public", schema, cleanup, admin)


def make_mysql(tmp: Path) -> Target:
    url = os.environ.get(MYSQL_ENV)
    if not url:
        pytest.skip(f"{MYSQL_ENV} is not set; MySQL/MariaDB tests need a server")
    admin = sa.create_engine(url)
    database = make_url(url).database or ""
    table = f"sg_res_{uuid.uuid4().hex[:8]}"
    with admin.begin() as conn:
        _victim(conn, table, ("one", "two", "three"))
    engine = open_readonly_engine(url, ReadOnlySettings(statement_timeout_s=5))
    found = read_schema(engine)
    assert found.default_schema == database
    schema = {k: v for k, v in found.tables.items() if k.endswith(table)}
    assert schema == {f"{database}.{table}": ["a", "b"]}
    return Target(
        "mysql", engine, table, "mysql", database, schema, [f"DROP TABLE IF EXISTS {table}"], admin
    )


MAKERS = {
    "sqlite": make_sqlite,
    "duckdb": make_duckdb,
    "postgres": make_postgres,
    "mysql": make_mysql,
}


@dataclass(frozen=True)
class Bypass:
    cls: str
    sql: str
    codes: frozenset[str]  # the validator refuses with one of these ("" = accepted, defused)
    engine: str  # "leak" | "rows" | "error" | "harmless"


def B(cls: str, sql: str, codes: str, engine: str) -> Bypass:
    return Bypass(cls, sql, frozenset(codes.split()), engine)


ALIAS = "alias column list"
WHOLE = "whole-row reference"
NESTED = "nested star"
SELECTOR = "column selector"
POSITIONAL = "positional reference"
SCHEMA = "schema-qualified name"
CATALOG = "catalog via schema"
SESSION = "session write"
SETTING = "server setting"
EXECUTABLE = "executable comment"
CLASSES = (
    ALIAS,
    WHOLE,
    NESTED,
    SELECTOR,
    POSITIONAL,
    SCHEMA,
    CATALOG,
    SESSION,
    SETTING,
    EXECUTABLE,
)

BYPASSES: dict[str, list[Bypass]] = {
    "sqlite": [
        B(ALIAS, "SELECT c.y FROM {t} AS c(x, y)", "column_denied", "error"),
        B(WHOLE, "SELECT c FROM {t} AS c", "whole_row_reference", "error"),
        B(NESTED, "SELECT CAST(c.* AS TEXT) FROM {t} AS c", "nested_star", "error"),
        B(
            SELECTOR,
            "SELECT COLUMNS('b') FROM {t}",
            "column_selector function_not_allowed",
            "error",
        ),
        B(POSITIONAL, "SELECT #2 FROM {t}", "parse_error positional_reference", "error"),
        B(SCHEMA, "SELECT b FROM {other}.{t}", "system_table table_not_allowed", "error"),
        B(CATALOG, "SELECT sql FROM main.sqlite_master", "system_table", "rows"),
        B(SESSION, "SELECT @v := 1", "session_variable_write", "error"),
        B(SETTING, "SELECT @@hostname", "server_setting", "error"),
        B(EXECUTABLE, "SELECT a FROM {t} /*!50000 UNION SELECT b FROM {t} */", "", "harmless"),
    ],
    "duckdb": [
        B(ALIAS, "SELECT c.y FROM {t} AS c(x, y)", "column_denied", "leak"),
        B(ALIAS, "SELECT y FROM (SELECT a, b FROM {t}) AS c(x, y)", "column_denied", "leak"),
        B(WHOLE, "SELECT c FROM {t} AS c", "whole_row_reference", "leak"),
        B(WHOLE, "SELECT c::VARCHAR FROM {t} AS c", "whole_row_reference", "leak"),
        B(NESTED, "SELECT CAST(c.* AS VARCHAR) FROM {t} AS c", "nested_star", "error"),
        B(SELECTOR, "SELECT COLUMNS('b') FROM {t}", "column_selector", "leak"),
        B(SELECTOR, "SELECT max(COLUMNS(*)) FROM {t}", "column_selector", "leak"),
        B(SELECTOR, "SELECT COLUMNS(lambda c: c LIKE 'b') FROM {t}", "column_selector", "leak"),
        B(SELECTOR, "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM {t}", "column_selector", "leak"),
        B(POSITIONAL, "SELECT #2 FROM {t}", "positional_reference", "leak"),
        B(SCHEMA, "SELECT a, b FROM {other}.{t}", "table_not_allowed", "leak"),
        B(CATALOG, "SELECT sql FROM main.sqlite_master", "system_table", "rows"),
        B(CATALOG, "SELECT table_name FROM information_schema.tables", "system_table", "rows"),
        # DuckDB reads @ as its absolute-value operator: @v and @@hostname are columns to it.
        B(SESSION, "SELECT @v := 1", "session_variable_write unresolved_column", "error"),
        B(SETTING, "SELECT @@hostname", "server_setting unresolved_column", "error"),
        B(EXECUTABLE, "SELECT a FROM {t} /*!50000 UNION SELECT b FROM {t} */", "", "harmless"),
    ],
    "postgres": [
        B(ALIAS, "SELECT c.y FROM {t} AS c(x, y)", "column_denied", "leak"),
        B(ALIAS, "WITH c(x, y) AS (SELECT a, b FROM {t}) SELECT y FROM c", "column_denied", "leak"),
        B(WHOLE, "SELECT c::text FROM {t} AS c", "whole_row_reference", "leak"),
        B(WHOLE, "SELECT c FROM {t} AS c", "whole_row_reference", "leak"),
        B(WHOLE, "SELECT row_to_json(c) FROM {t} AS c", "whole_row_reference", "leak"),
        B(NESTED, "SELECT CAST(c.* AS TEXT) FROM {t} AS c", "nested_star", "leak"),
        B(NESTED, "SELECT 'x' || c.* FROM {t} AS c", "nested_star", "leak"),
        B(
            SELECTOR,
            "SELECT COLUMNS('b') FROM {t}",
            "column_selector function_not_allowed",
            "error",
        ),
        B(POSITIONAL, "SELECT #2 FROM {t}", "parse_error positional_reference", "error"),
        B(SCHEMA, "SELECT a, b FROM {other}.{t}", "table_not_allowed", "leak"),
        B(CATALOG, "SELECT rolname FROM pg_catalog.pg_roles", "system_table", "rows"),
        B(CATALOG, "SELECT table_name FROM information_schema.tables", "system_table", "rows"),
        B(SESSION, "SELECT @v := 1", "session_variable_write", "error"),
        # PostgreSQL reads @@ as its text-search operator on a column named hostname.
        B(SETTING, "SELECT @@hostname", "server_setting unresolved_column", "error"),
        B(EXECUTABLE, "SELECT a FROM {t} /*!50000 UNION SELECT b FROM {t} */", "", "harmless"),
    ],
    "mysql": [
        B(ALIAS, "SELECT c.y FROM {t} AS c(x, y)", "column_denied", "error"),
        B(WHOLE, "SELECT c FROM {t} AS c", "whole_row_reference", "error"),
        B(NESTED, "SELECT CAST(c.* AS CHAR) FROM {t} AS c", "nested_star", "error"),
        B(
            SELECTOR,
            "SELECT COLUMNS('b') FROM {t}",
            "column_selector function_not_allowed",
            "error",
        ),
        B(POSITIONAL, "SELECT #2 FROM {t}", "empty_select", "error"),
        B(SCHEMA, "SELECT User FROM {other}.user", "system_table", "rows"),
        B(CATALOG, "SELECT table_name FROM information_schema.tables", "system_table", "rows"),
        B(SESSION, "SELECT @v := 1", "session_variable_write", "rows"),
        B(SETTING, "SELECT @@hostname", "server_setting", "rows"),
        B(SETTING, "SELECT @@global.secure_file_priv", "server_setting", "rows"),
        B(
            EXECUTABLE,
            "SELECT a FROM {t} /*!50000 UNION SELECT b FROM {t} */",
            "executable_comment",
            "leak",
        ),
    ],
}

CASES = [(d, b) for d, bs in BYPASSES.items() for b in bs]
IDS = [f"{d}-{b.cls}-{b.sql[:40]}" for d, b in CASES]


def render(bypass: Bypass, target: Target | None = None) -> str:
    table = target.table if target else "sg_res"
    other = target.other if target else "other"
    return bypass.sql.replace("{t}", table).replace("{other}", other)


def test_every_class_is_covered_on_every_database():
    for dialect, bypasses in BYPASSES.items():
        assert {b.cls for b in bypasses} == set(CLASSES), dialect


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    made: dict[str, Target] = {}

    def get(dialect: str) -> Target:
        if dialect not in made:
            made[dialect] = MAKERS[dialect](tmp_path_factory.mktemp(dialect))
        return made[dialect]

    yield get
    for target in made.values():
        if target.admin is not None:
            with target.admin.begin() as conn:
                for sql in target.cleanup:
                    conn.exec_driver_sql(sql)
            target.admin.dispose()
        target.engine.dispose()


def _run(target: Target, sql: str) -> tuple[list[tuple], BaseException | None]:
    if target.dialect in ("postgres", "mysql"):
        sql = sql.replace("%", "%%")
    with target.engine.connect() as conn:
        try:
            result = conn.exec_driver_sql(sql)
            return ([tuple(r) for r in result.fetchall()] if result.returns_rows else []), None
        except Exception as error:  # the engine said no
            return [], error


def _leaks(rows: list[tuple]) -> bool:
    return bool(LEAK.search(repr(rows)))


@pytest.mark.parametrize(("dialect", "bypass"), CASES, ids=IDS)
def test_validator_refuses_with_the_real_schema(targets, dialect, bypass):
    target = targets(dialect)
    result = target.validator().validate(render(bypass, target))
    if not bypass.codes:
        assert result.ok, result.findings
        rows, error = _run(target, result.sql)
        assert error is None and rows and not _leaks(rows), (result.sql, rows, error)
        return
    assert not result.ok, f"{dialect}: accepted {result.sql!r}"
    assert result.refusal.code in bypass.codes, result.findings
    assert result.refusal.message


@pytest.mark.parametrize(("dialect", "bypass"), CASES, ids=IDS)
def test_engine_with_validator_off(targets, dialect, bypass):
    target = targets(dialect)
    rows, error = _run(target, render(bypass, target))
    if bypass.engine == "error":
        assert error is not None, rows
    elif bypass.engine == "leak":
        assert error is None and _leaks(rows), (rows, error)
    elif bypass.engine == "rows":
        assert error is None and rows, error
    else:
        assert error is None and not _leaks(rows), (rows, error)


@pytest.mark.parametrize("dialect", list(MAKERS))
def test_legitimate_queries_pass_and_run(targets, dialect):
    """No false positives: the default schema spelled out, stars, joins, CTEs, alias lists."""
    target = targets(dialect)
    t, default = target.table, target.default_schema
    validator = target.validator()
    legit = [
        f"SELECT a FROM {t}",
        f"SELECT a FROM {default}.{t}",
        f"SELECT x.a FROM {t} AS x WHERE x.a > 1 ORDER BY x.a",
        f"WITH w AS (SELECT a FROM {t}) SELECT count(*) FROM w",
        f"SELECT a FROM {t} WHERE a IN (SELECT a FROM {t} WHERE a < 3)",
        f"SELECT a AS n FROM {t} ORDER BY n",
    ]
    if dialect in ("postgres", "duckdb"):
        legit.append(f"SELECT c.x FROM {t} AS c(x)")
    for sql in legit:
        result = validator.validate(sql)
        assert result.ok, (sql, result.findings)
        rows, error = _run(target, result.sql)
        assert error is None and rows and not _leaks(rows), (sql, result.sql, error)
    star = validator.validate(f"SELECT * FROM {t}")
    assert star.ok and "star_columns_omitted" in star.codes, star.findings
    rows, error = _run(target, star.sql)
    assert error is None and len(rows) == 3 and not _leaks(rows), (star.sql, rows, error)
