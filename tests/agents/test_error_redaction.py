"""Error text never carries a protected value: under a policy that protects columns the
executor reduces the database's error to its class, on every engine, and only the server log
(debug level) has the full text.

Each engine is made to fail with a message that quotes a value: PostgreSQL's
``invalid input syntax for type integer: "<value>"``, DuckDB's ``Could not convert string
'<value>'``, SQLite's ``JSON path error near '<value>'`` and MariaDB's ``XPATH syntax error:
'<value>'``. The same statement without redaction shows the value (the test is not vacuous).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import ReadOnlySettings, open_readonly_engine
from safety.error_text import error_class
from safety.statement import (
    _minted as unchecked,  # the database's own walls, tested apart from the validator
)

SECRET = "Zq9secretvalue"
FAILING = {
    "sqlite": "SELECT json_extract('{{}}', secret) FROM {t}",
    "duckdb": "SELECT CAST(secret AS INTEGER) FROM {t}",
    "postgres": "SELECT CAST(secret AS INTEGER) FROM {t}",
    # MariaDB's XPATH needs a constant: the value stands in the statement, as a literal would.
    "mysql": "SELECT EXTRACTVALUE('<a/>', '))" + SECRET + "') FROM {t}",
}
ENGINES = ("sqlite", "sqlite-sandbox", "duckdb", "duckdb-sandbox", "postgres", "mysql")


@pytest.fixture
def target(request, tmp_path: Path):
    kind = request.param
    dialect = kind.split("-")[0]
    settings = ReadOnlySettings(
        statement_timeout_s=10, sandbox_workers=1 if kind.endswith("sandbox") else 0
    )
    table = f"sg_secret_{uuid.uuid4().hex[:8]}"
    cleanup = None
    if dialect == "sqlite":
        path = tmp_path / "x.db"
        with sqlite3.connect(path) as conn:
            conn.execute(f"CREATE TABLE {table} (secret TEXT)")
            conn.execute(f"INSERT INTO {table} VALUES ('{SECRET}')")
        url = f"sqlite:///{path}"
    elif dialect == "duckdb":
        import duckdb

        path = tmp_path / "x.duckdb"
        conn = duckdb.connect(str(path))
        conn.execute(f"CREATE TABLE {table} (secret VARCHAR)")
        conn.execute(f"INSERT INTO {table} VALUES ('{SECRET}')")
        conn.close()
        url = f"duckdb:///{path}"
    else:
        env = "SQLGATE_TEST_POSTGRES_URL" if dialect == "postgres" else "SQLGATE_TEST_MYSQL_URL"
        url = os.environ.get(env, "")
        if not url:
            pytest.skip(f"{env} is not set; the {dialect} redaction test needs a server")
        cleanup = sa.create_engine(url)
        with cleanup.begin() as conn:
            conn.exec_driver_sql(f"CREATE TABLE {table} (secret VARCHAR(40))")
            conn.exec_driver_sql(f"INSERT INTO {table} VALUES ('{SECRET}')")
    engine = open_readonly_engine(url, settings)
    yield dialect, engine, FAILING[dialect].format(t=table)
    engine.dispose()
    if cleanup is not None:
        with cleanup.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")
        cleanup.dispose()


def _fail(executor: SQLExecutor, sql: str, dialect: str) -> ExecutionError:
    with pytest.raises(ExecutionError) as caught:
        executor.run(unchecked(sql, dialect, None))
    return caught.value


@pytest.mark.parametrize("target", ENGINES, indirect=True)
class TestErrorRedaction:
    def test_without_redaction_the_engine_quotes_the_value(self, target):
        dialect, engine, sql = target
        assert SECRET in _fail(SQLExecutor(engine), sql, dialect).message

    def test_with_redaction_only_the_error_class_leaves(self, target, caplog):
        dialect, engine, sql = target
        with caplog.at_level(logging.DEBUG, logger="agents.sql_executor"):
            error = _fail(SQLExecutor(engine, redact_errors=True), sql, dialect)
        assert error.code == "execution_error"
        assert SECRET not in error.message
        assert "details withheld" in error.message
        assert SECRET in caplog.text  # the server log keeps the full text, at debug level
        assert all(r.levelno == logging.DEBUG for r in caplog.records if SECRET in r.getMessage())


class TestErrorClass:
    @pytest.mark.parametrize(
        ("message", "code", "expected"),
        [
            (
                'invalid input syntax for type integer: "ann@x.org"',
                "22P02",
                "invalid input syntax for type integer (SQLSTATE 22P02;",
            ),
            ("value 51000 is out of range for type smallint", "22003", "value <n> is out of range"),
            ("Truncated incorrect DOUBLE value: 'ann' (error 1292)", 1292, "Truncated incorrect"),
            ("JSON path error near 'x'", None, "JSON path error near ("),
            ('invalid input syntax for type json DETAIL: Token "x" is invalid.', None, "json ("),
        ],
    )
    def test_values_and_numbers_are_dropped(self, message, code, expected):
        reduced = error_class(message, code)
        assert expected in reduced
        assert "ann" not in reduced and "51000" not in reduced and '"' not in reduced


class TestTheDatabaseFactoryRedactsUnderColumnRules:
    """Every executor sqlgate builds comes from ``TargetDatabase.executor``: it redacts exactly
    when the policy (or a role's) protects columns, so the trace, the result and a correction
    prompt, which all take the executor's message, never see the value."""

    @pytest.mark.parametrize(
        ("columns", "redacted"),
        [({}, False), ({"deny": ["t.other"]}, True), ({"allow": ["t.secret"]}, True)],
    )
    def test_redaction_follows_the_policy(self, tmp_path: Path, columns, redacted):
        from orchestrator.core.database import TargetDatabase
        from safety import Policy

        path = tmp_path / "x.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t (secret TEXT, other TEXT)")
            conn.execute(f"INSERT INTO t VALUES ('{SECRET}', 'o')")
        database = TargetDatabase(
            f"sqlite:///{path}", policy=Policy.from_data({"columns": columns})
        )
        try:
            executor = database.executor()
            assert executor.redact_errors is redacted
            error = _fail(executor, FAILING["sqlite"].format(t="t"), "sqlite")
        finally:
            database.dispose()
        assert (SECRET in error.message) is not redacted
