"""SQL-injection payloads (payloadbox lists) spliced into query templates.

Whatever the validator accepts must be one read-only query: it re-validates to itself, and
running it on a read-only database changes nothing.
"""

from __future__ import annotations

import logging
import sqlite3

import pytest
import sqlalchemy as sa
from safety_backends import TickingClock
from safety_corpora import require

from safety import ReadOnlySettings, SqlValidator, open_readonly_engine

TEMPLATES = (
    "SELECT name FROM users WHERE name = '{p}'",
    "SELECT name FROM users WHERE id = {p}",
    "SELECT name FROM users WHERE name LIKE '%{p}%' ORDER BY name",
    "SELECT name FROM users ORDER BY {p}",
)


@pytest.fixture(scope="module")
def payloads() -> list[str]:
    root = require("sqli_payloads", "Intruder")
    found = {
        line
        for path in sorted(root.rglob("*.txt"))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    }
    assert len(found) > 1000
    return sorted(found)


@pytest.fixture(autouse=True)
def quiet_sqlglot():
    logging.getLogger("sqlglot").setLevel(logging.ERROR)


def spliced(payloads, templates):
    return [t.replace("{p}", p) for t in templates for p in payloads]


def accepted(dialect, texts):
    validator = SqlValidator(dialect)
    out = []
    for text in texts:
        result = validator.validate(text)
        if result.ok:
            again = validator.validate(result.sql)
            assert again.ok and again.sql == result.sql, (text, result.sql, again.refusal)
            out.append(result.sql)
    return out


def test_sqlite_accepted_payloads_only_read(payloads, tmp_path):
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (id INTEGER, name TEXT, password TEXT)")
        conn.executemany("INSERT INTO users VALUES (?, ?, ?)", [(1, "ada", "x"), (2, "bob", "y")])
    engine = open_readonly_engine(
        f"sqlite:///{path}", ReadOnlySettings(statement_timeout_s=5.0), clock=TickingClock()
    )
    statements = accepted("sqlite", spliced(payloads, TEMPLATES))
    assert statements, "some payloads are plain reads and should be accepted"
    for sql in statements:
        with engine.connect() as conn:
            try:
                conn.exec_driver_sql(sql).fetchall()
            except sa.exc.DBAPIError:
                pass  # a read that fails (unknown column, type error) is still only a read
    engine.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id, name, password FROM users ORDER BY id").fetchall() == [
            (1, "ada", "x"),
            (2, "bob", "y"),
        ]
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_accepted_payloads_revalidate_to_themselves(payloads, dialect):
    assert accepted(dialect, spliced(payloads, TEMPLATES[:1]))


def test_duckdb_accepted_payloads_only_read(payloads, tmp_path):
    import duckdb

    path = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE users (id INTEGER, name VARCHAR, password VARCHAR)")
    conn.execute("INSERT INTO users VALUES (1, 'ada', 'x'), (2, 'bob', 'y')")
    conn.close()
    engine = open_readonly_engine(f"duckdb:///{path}", ReadOnlySettings(statement_timeout_s=2.0))
    for sql in accepted("duckdb", spliced(payloads, TEMPLATES[:1])):
        with engine.connect() as conn:
            try:
                conn.exec_driver_sql(sql).fetchall()
            except sa.exc.DBAPIError:
                pass
    engine.dispose()
    conn = duckdb.connect(str(path), read_only=True)
    assert conn.execute("SELECT id, name, password FROM users ORDER BY id").fetchall() == [
        (1, "ada", "x"),
        (2, "bob", "y"),
    ]
    assert [
        r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()
    ] == ["users"]
    conn.close()


def test_stacked_and_time_based_payloads_are_refused(payloads):
    validator = SqlValidator("mysql")
    for payload in (
        "1; DROP TABLE users",
        "1 AND SLEEP(5)",
        "1 OR BENCHMARK(10000000, MD5(1))",
        "1 UNION SELECT LOAD_FILE('/etc/passwd')",
        "1; SELECT pg_sleep(5)",
    ):
        result = validator.validate(TEMPLATES[1].replace("{p}", payload))
        assert not result.ok, payload
