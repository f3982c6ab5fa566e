"""The read-only connection reads SQL text the way the validator did, whatever the server's defaults.

A PostgreSQL database whose default is ``standard_conforming_strings = off`` reads a backslash
inside ``'...'`` as an escape: ``'a\\'`` no longer ends where sqlglot's ``postgres`` reading ends
it, and the rest of the statement is read as SQL nobody validated (a ``UNION`` over a denied
table). The read-only engine pins the lexical settings at connect and in every transaction.
"""

from __future__ import annotations

import os
import uuid

import pytest
import sqlalchemy as sa
from safety_backends import MYSQL_ENV, POSTGRES_ENV
from sqlalchemy.engine import make_url

from safety import ReadOnlySettings, SafetyPolicy, SqlValidator, open_readonly_engine
from safety.readonly import MYSQL_SQL_MODE, POSTGRES_LEXICAL

SMUGGLE = "SELECT 'a\\' AS x, name FROM people WHERE name = ' UNION SELECT secret FROM vault -- '"


@pytest.fixture(scope="module")
def lax_database():
    """A database (and a role) whose defaults read backslashes as escapes."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; the PostgreSQL lexical tests need a server")
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"sg_lax_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
        conn.exec_driver_sql(f"ALTER DATABASE {name} SET standard_conforming_strings = off")
        conn.exec_driver_sql(f"ALTER DATABASE {name} SET backslash_quote = on")
    target = make_url(url).set(database=name)
    owner = sa.create_engine(target)
    with owner.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE people (name TEXT)")
        conn.exec_driver_sql("INSERT INTO people VALUES ('ann')")
        conn.exec_driver_sql("CREATE TABLE vault (secret TEXT)")
        conn.exec_driver_sql("INSERT INTO vault VALUES ('the-secret')")
    owner.dispose()
    yield target.render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


class TestPostgresLexicalSettings:
    def test_the_server_default_really_reads_backslashes_as_escapes(self, lax_database):
        """Without the pin the smuggled UNION runs: the attack is real on this database."""
        plain = sa.create_engine(lax_database)
        try:
            with plain.connect() as conn:
                assert conn.exec_driver_sql("SHOW standard_conforming_strings").scalar() == "off"
                rows = conn.exec_driver_sql(SMUGGLE.replace("%", "%%")).fetchall()
        finally:
            plain.dispose()
        assert ("the-secret",) in [tuple(r) for r in rows]

    def test_the_validator_accepts_the_text_as_one_literal(self):
        validator = SqlValidator(
            "postgres",
            SafetyPolicy(denied_tables=("vault",)),
            schema={"people": ["name"], "vault": ["secret"]},
        )
        result = validator.validate(SMUGGLE)
        assert result.ok, result.findings  # for the validator, vault is inside a string

    @pytest.mark.parametrize("session_set", [False, True], ids=["database-default", "session-set"])
    def test_the_read_only_engine_reads_it_as_the_validator_did(self, lax_database, session_set):
        validator = SqlValidator(
            "postgres",
            SafetyPolicy(denied_tables=("vault",)),
            schema={"people": ["name"], "vault": ["secret"]},
        )
        sql = validator.validate(SMUGGLE).sql
        engine = open_readonly_engine(lax_database, ReadOnlySettings(statement_timeout_s=5))
        try:
            with engine.connect() as conn:
                if session_set:  # a session that turned it off again before the statement
                    conn.exec_driver_sql("SET standard_conforming_strings = off")
                    conn.commit()
                settings = {
                    name: conn.exec_driver_sql(f"SHOW {name}").scalar() for name in POSTGRES_LEXICAL
                }
                rows = [tuple(r) for r in conn.exec_driver_sql(sql.replace("%", "%%"))]
        finally:
            engine.dispose()
        assert {k: v.lower() for k, v in settings.items()} == {
            k: v.lower() for k, v in POSTGRES_LEXICAL.items()
        }
        assert rows == []  # no person is named ' UNION SELECT ...': nothing from vault
        assert all("the-secret" not in repr(r) for r in rows)


class TestMysqlLexicalSettings:
    """A URL (or server default) asking for a multi-byte character set whose bytes can hide a
    quote (gbk, sjis, big5) still gets utf8mb4, and the pinned sql_mode."""

    def test_the_session_reads_text_as_utf8mb4(self):
        url = os.environ.get(MYSQL_ENV)
        if not url:
            pytest.skip(f"{MYSQL_ENV} is not set; the MariaDB lexical test needs a server")
        asked = make_url(url).update_query_dict({"charset": "gbk"})
        plain = sa.create_engine(asked)
        try:
            with plain.connect() as conn:
                assert conn.exec_driver_sql("SELECT @@character_set_client").scalar() == "gbk"
        finally:
            plain.dispose()
        engine = open_readonly_engine(asked.render_as_string(hide_password=False))
        try:
            with engine.connect() as conn:
                client, connection, mode = conn.exec_driver_sql(
                    "SELECT @@character_set_client, @@character_set_connection, @@sql_mode"
                ).one()
        finally:
            engine.dispose()
        assert (client, connection) == ("utf8mb4", "utf8mb4")
        assert mode == MYSQL_SQL_MODE
