"""The one migration runner of sqlgate's state database, and the engine setup it relies on.

Every table sqlgate keeps (approvals, audit, ledger here; runs, server events and memory through
``orchestrator.core.state_db``) belongs to a *component* with an append-only list of migrations. The
runner records each component's version in ``sqlgate_schema`` and applies the missing steps in
one transaction that takes the database's write lock before it creates or reads anything
(``BEGIN IMMEDIATE`` on SQLite, a transaction-scoped advisory lock on PostgreSQL), so several
processes may call it at once on a fresh database.

Example:
    >>> engine = state_engine("sqlite://")
    >>> steps = [lambda conn: conn.exec_driver_sql("CREATE TABLE t (a INTEGER)")]
    >>> migrate(engine, "example", steps), migrate(engine, "example", steps)
    (1, 1)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from .errors import SchemaVersionError

__all__ = [
    "Migration",
    "migrate",
    "schema_versions",
    "state_engine",
    "to_timestamp",
    "write_transaction",
]

#: One step: DDL (and data moves) on an open transaction. Never edit one that has shipped.
Migration = Callable[[Connection], None]

_metadata = sa.MetaData()
schema_versions = sa.Table(
    "sqlgate_schema",
    _metadata,
    sa.Column("component", sa.String(40), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
)

#: Serialises concurrent migrations on PostgreSQL (any constant shared by every sqlgate process).
_MIGRATION_LOCK = 7313200501


def state_engine(url: str) -> Engine:
    """An engine for the state database: SQLite (WAL, a busy timeout, writes that take the lock
    first) or a server database with pre-ping."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return sa.create_engine(url, pool_pre_ping=True)
    database = parsed.database
    if not database or database == ":memory:":
        engine = sa.create_engine(
            url, poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    else:
        Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
    _own_sqlite_transactions(engine)
    return engine


def _own_sqlite_transactions(engine: Engine) -> None:
    """Let SQLAlchemy, not the driver, begin transactions, so writes can BEGIN IMMEDIATE
    (take the write lock first, then read-check-write) — SQLAlchemy's documented recipe."""

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout=30000")
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql(
            f"BEGIN {conn.get_execution_options().get('sqlgate_begin', '')}".strip()
        )


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A write transaction; on SQLite it takes the write lock up front (BEGIN IMMEDIATE)."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(sqlgate_begin="IMMEDIATE")
        with conn.begin():
            yield conn


def migrate(
    engine: Engine,
    component: str,
    migrations: Sequence[Migration],
    *,
    adopt: Callable[[Connection], int] | None = None,
) -> int:
    """Bring ``component`` to ``len(migrations)``; return that version.

    ``adopt(conn)`` tells the version of a database written before ``sqlgate_schema`` existed
    (it inspects the tables it finds); without it such a component starts at 0.

    Raises:
        SchemaVersionError: the database is newer than this code.
    """
    deadline = time.monotonic() + 30
    while True:
        try:
            return _migrate(engine, component, migrations, adopt)
        except sa.exc.OperationalError as exc:
            # SQLite answers "database is locked" without waiting in a few cases (a fresh file
            # switching to WAL while other processes open it): the migration is one
            # transaction, so it is simply tried again.
            locked = engine.dialect.name == "sqlite" and "locked" in str(exc.orig)
            if not locked or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _migrate(
    engine: Engine,
    component: str,
    migrations: Sequence[Migration],
    adopt: Callable[[Connection], int] | None,
) -> int:
    with write_transaction(engine) as conn:
        # The lock comes before anything is created: two processes creating ``sqlgate_schema``
        # at once on a fresh PostgreSQL database would otherwise collide (a unique violation
        # in the catalogue). On SQLite the transaction itself began IMMEDIATE (the write lock).
        if engine.dialect.name == "postgresql":
            conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
        schema_versions.create(conn, checkfirst=True)
        row = conn.execute(
            sa.select(schema_versions.c.version).where(schema_versions.c.component == component)
        ).first()
        if row is None:
            current = adopt(conn) if adopt is not None else 0
            conn.execute(
                sa.insert(schema_versions).values(
                    component=component, version=current, applied_at=datetime.now(UTC)
                )
            )
        else:
            current = row.version
        if current > len(migrations):
            raise SchemaVersionError(
                f"the state database has {component} at schema version {current}; this sqlgate "
                f"knows up to {len(migrations)}: upgrade sqlgate"
            )
        for version in range(current + 1, len(migrations) + 1):
            migrations[version - 1](conn)
        if current < len(migrations):
            conn.execute(
                sa.update(schema_versions)
                .where(schema_versions.c.component == component)
                .values(version=len(migrations), applied_at=datetime.now(UTC))
            )
        return len(migrations)


def schema_version(engine: Engine, component: str) -> int:
    """The recorded version of ``component`` (0 when it was never migrated)."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("sqlgate_schema"):
            return 0
        row = conn.execute(
            sa.select(schema_versions.c.version).where(schema_versions.c.component == component)
        ).first()
    return row.version if row is not None else 0


def to_timestamp(
    conn: Connection,
    table: str,
    key: str,
    columns: Sequence[str],
    *,
    nullable: Sequence[str] = (),
) -> None:
    """A migration helper: turn ISO-8601 text columns into timestamp columns, data included.

    ``key`` names a unique column of ``table``; the columns in ``nullable`` may hold NULL (the
    others are NOT NULL). On PostgreSQL each column changes type in place (``TIMESTAMPTZ``); on
    SQLite (3.35+) a new ``DATETIME`` column is filled with the converted values in the form
    SQLAlchemy's ``DateTime`` reads back, the text column dropped and the new one renamed.
    """
    if conn.dialect.name == "postgresql":
        for column in columns:
            conn.exec_driver_sql(
                f"ALTER TABLE {table} ALTER COLUMN {column} TYPE TIMESTAMPTZ "
                f"USING {column}::timestamptz"
            )
        return
    shape = sa.table(table, sa.column(key), *(sa.column(c) for c in columns))
    rows = conn.execute(sa.select(shape)).all()
    for column in columns:
        constraint = "" if column in nullable else " NOT NULL DEFAULT '1970-01-01 00:00:00.000000'"
        conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column}__ts DATETIME{constraint}")
    typed = sa.table(
        table, sa.column(key), *(sa.column(f"{c}__ts", sa.DateTime(timezone=True)) for c in columns)
    )
    if rows:
        conn.execute(
            sa.update(typed)
            .where(typed.c[key] == sa.bindparam("row_key"))
            .values({f"{c}__ts": sa.bindparam(f"new_{c}") for c in columns}),
            [
                {"row_key": getattr(row, key)}
                | {f"new_{c}": _parse_time(getattr(row, c)) for c in columns}
                for row in rows
            ],
        )
    for column in columns:
        conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.exec_driver_sql(f"ALTER TABLE {table} RENAME COLUMN {column}__ts TO {column}")


def _parse_time(text: str | None) -> datetime | None:
    """ISO-8601 text as an aware UTC datetime (text without an offset is taken as UTC)."""
    if not text:
        return None
    moment = datetime.fromisoformat(str(text))
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
