"""Real databases for the read-only tests: a victim table, an owner engine and a reader engine.

Not a test module: the attack matrix and the read-only tests import it.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url

from safety import ReadOnlySettings, open_readonly_engine

POSTGRES_ENV = "SQLGATE_TEST_POSTGRES_URL"
MYSQL_ENV = "SQLGATE_TEST_MYSQL_URL"
READER = (
    "sqlgate_reader"  # least-privilege login role created for the tests (SELECT on the victim only)
)
SERVER_TIMEOUT_S = 0.5
ATTACK_TABLES = frozenset(
    {"sg_new", "sg_copy", "sg_stolen"}
)  # tables the attack matrix tries to create


class TickingClock:
    """A clock that advances a fixed step each time it is read (deterministic SQLite deadlines)."""

    def __init__(self, step: float = 0.01) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@dataclass
class Backend:
    dialect: str
    admin: Engine
    owner: Engine
    table: str
    tmp: Path
    reader: Engine | None = None
    extra_state: list = field(default_factory=list)
    lock: int = field(
        default_factory=lambda: uuid.uuid4().int % 1_000_000_000
    )  # per run: runs may share a server

    def engine(self, role: str) -> Engine:
        if role == "reader":
            if self.reader is None:
                pytest.skip(f"{self.dialect}: no least-privilege reader role for this backend")
            return self.reader
        return self.owner

    def state(self) -> tuple:
        """Everything an attack could have changed: rows, tables, files, held locks."""
        engine = self.owner if self.dialect == "duckdb" else self.admin
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(f"SELECT COUNT(*), SUM(a) FROM {self.table}").one()
            # Only names this run owns or its attacks would create: other test runs may share the server.
            tables = sorted(
                t for t in sa.inspect(conn).get_table_names() if t in {self.table, *ATTACK_TABLES}
            )
            locks = tuple(conn.exec_driver_sql(sql).scalar() for sql in self.extra_state)
        files = sorted(p.name for p in self.tmp.iterdir())
        return tuple(rows), tables, files, locks


def _victim_name() -> str:
    return f"sg_victim_{uuid.uuid4().hex[:8]}"


def _fill(conn, table: str) -> None:
    conn.exec_driver_sql(f"CREATE TABLE {table} (a INTEGER, b VARCHAR(20))")
    conn.exec_driver_sql(f"INSERT INTO {table} (a, b) VALUES (1, 'one'), (2, 'two'), (3, 'three')")


def make_sqlite(tmp: Path) -> Backend:
    path = tmp / "victim.db"
    table = _victim_name()
    with sqlite3.connect(path) as conn:
        conn.execute(f"CREATE TABLE {table} (a INTEGER, b VARCHAR(20))")
        conn.execute(f"INSERT INTO {table} (a, b) VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    files = tmp / "files"
    files.mkdir()
    settings = ReadOnlySettings(statement_timeout_s=1.0, max_value_bytes=1_000_000)
    owner = open_readonly_engine(f"sqlite:///{path}", settings, clock=TickingClock())
    return Backend("sqlite", sa.create_engine(f"sqlite:///{path}"), owner, table, files)


def make_duckdb(tmp: Path) -> Backend:
    import duckdb

    path = tmp / "victim.duckdb"
    table = _victim_name()
    conn = duckdb.connect(str(path))
    conn.execute(f"CREATE TABLE {table} (a INTEGER, b VARCHAR(20))")
    conn.execute(f"INSERT INTO {table} VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    conn.close()
    files = tmp / "files"
    files.mkdir()
    owner = open_readonly_engine(
        f"duckdb:///{path}", ReadOnlySettings(statement_timeout_s=SERVER_TIMEOUT_S)
    )
    return Backend("duckdb", owner, owner, table, files)


def make_postgres(tmp: Path) -> Backend:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL read-only tests need a server")
    admin = sa.create_engine(url)
    table = _victim_name()
    with admin.begin() as conn:
        _fill(conn, table)
        conn.exec_driver_sql(
            f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') "
            f"THEN CREATE ROLE {READER} LOGIN; END IF; END$$"
        )
        conn.exec_driver_sql(f"GRANT SELECT ON {table} TO {READER}")
    settings = ReadOnlySettings(statement_timeout_s=SERVER_TIMEOUT_S)
    owner = open_readonly_engine(url, settings)
    reader_url = (
        make_url(url).set(username=READER, password=None).render_as_string(hide_password=False)
    )
    files = tmp / "files"
    files.mkdir()
    backend = Backend(
        "postgres", admin, owner, table, files, open_readonly_engine(reader_url, settings)
    )
    backend.extra_state = [
        f"SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = {backend.lock}"
    ]
    return backend


def make_mysql(tmp: Path) -> Backend:
    url = os.environ.get(MYSQL_ENV)
    if not url:
        pytest.skip(f"{MYSQL_ENV} is not set; MySQL/MariaDB read-only tests need a server")
    admin = sa.create_engine(url)
    table = _victim_name()
    database = make_url(url).database
    with admin.begin() as conn:
        _fill(conn, table)
        for host in ("%%", "localhost"):
            conn.exec_driver_sql(f"CREATE USER IF NOT EXISTS '{READER}'@'{host}'")
            conn.exec_driver_sql(f"GRANT SELECT ON {database}.{table} TO '{READER}'@'{host}'")
    settings = ReadOnlySettings(statement_timeout_s=SERVER_TIMEOUT_S)
    owner = open_readonly_engine(url, settings)
    reader_url = (
        make_url(url).set(username=READER, password=None).render_as_string(hide_password=False)
    )
    files = tmp / "files"
    files.mkdir()
    backend = Backend(
        "mysql", admin, owner, table, files, open_readonly_engine(reader_url, settings)
    )
    backend.extra_state = [f"SELECT IS_FREE_LOCK('sg_lock_{backend.lock}')"]
    return backend


def drop(backend: Backend) -> None:
    if backend.dialect in ("postgres", "mysql"):
        with backend.admin.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {backend.table}")
    for engine in {backend.admin, backend.owner, backend.reader} - {None}:
        engine.dispose()


MAKERS = {
    "sqlite": make_sqlite,
    "duckdb": make_duckdb,
    "postgres": make_postgres,
    "mysql": make_mysql,
}
