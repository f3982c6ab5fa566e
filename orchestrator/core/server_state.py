"""The service's own tables in sqlgate's state database: runs as the service knows them, and run events.

``sqlgate_server_runs``: one row per submitted run (its owner, questions, status, results).
``sqlgate_server_events``: run progress and run finished events, in ``seq`` order. Approval events
are not copied here: they are read from the approvals audit log, which every process writes.

Both live beside the approvals and run-checkpoint tables (a SQLite file by default, PostgreSQL
shared by several server processes), so any process can answer for any run. Their schema is the
``server`` component of the state database's one migration runner.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from approvals.migrations import migrate, write_transaction
from orchestrator.core.runs import to_timestamp, utc

#: Server run states: ``queued`` -> ``running`` -> ``awaiting_approval`` -> ``resuming`` -> ``finished`` | ``failed``.
SERVER_RUN_STATES = ("queued", "running", "awaiting_approval", "resuming", "finished", "failed")

_metadata = sa.MetaData()
server_runs = sa.Table(
    "sqlgate_server_runs",
    _metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(200), nullable=False, index=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("batch_id", sa.String(64), nullable=True),
    sa.Column("questions", sa.Text, nullable=False),
    sa.Column("results", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("follow_up_of", sa.String(64), nullable=True, index=True),
)
server_events = sa.Table(
    "sqlgate_server_events",
    _metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("batch_id", sa.String(64), nullable=True),
    sa.Column("event", sa.String(40), nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
)

#: Serialises event appends on PostgreSQL so ``seq`` order is commit order (as the audit log does).
_APPEND_LOCK = 7313200601


def _v1(conn: Connection) -> None:
    """Server runs and run events, timestamps as text."""
    v1 = sa.MetaData()
    sa.Table(
        "sqlgate_server_runs",
        v1,
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=False, index=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=True),
        sa.Column("questions", sa.Text, nullable=False),
        sa.Column("results", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
    )
    sa.Table(
        "sqlgate_server_events",
        v1,
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.String(40), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("batch_id", sa.String(64), nullable=True),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )
    v1.create_all(conn, checkfirst=True)


def _v2(conn: Connection) -> None:
    """Real timestamp columns."""
    to_timestamp(conn, "sqlgate_server_runs", "run_id", ["created_at", "updated_at"])
    to_timestamp(conn, "sqlgate_server_events", "seq", ["at"])


def _v3(conn: Connection) -> None:
    """A follow-up run keeps the id of the run whose clarifying questions it answers."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_server_runs ADD COLUMN follow_up_of VARCHAR(64)")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sqlgate_server_runs_follow_up_of "
        "ON sqlgate_server_runs (follow_up_of)"
    )


MIGRATIONS = (_v1, _v2, _v3)


def _adopt(conn: Connection) -> int:
    """A database from before ``sqlgate_schema``: the tables existed at version 1."""
    return 1 if sa.inspect(conn).has_table("sqlgate_server_runs") else 0


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RunRow:
    run_id: str
    owner: str
    status: str
    batch_id: str | None
    questions: list[str]
    results: list[dict[str, Any]] | None
    error: dict[str, Any] | None
    created_at: str
    updated_at: str
    follow_up_of: str | None = None


@dataclass(frozen=True)
class RunEvent:
    seq: int
    at: str
    run_id: str
    batch_id: str | None
    event: str
    detail: dict[str, Any] = field(default_factory=dict)


class ServerState:
    """Reads and writes of the service's tables, on an engine shared with the approvals store."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self._ready = False
        self._owners: dict[str, str] = {}

    def setup(self) -> None:
        """Create or migrate the tables (the ``server`` component); safe to call any number of times."""
        if not self._ready:
            migrate(self.engine, "server", MIGRATIONS, adopt=_adopt)
            self._ready = True

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with write_transaction(self.engine) as conn:
            yield conn

    # -- runs --------------------------------------------------------------------------------
    def create_run(
        self, run_id: str, owner: str, questions: list[str], *, follow_up_of: str | None = None
    ) -> RunRow:
        at = _now()
        with self._write() as conn:
            conn.execute(
                server_runs.insert().values(
                    run_id=run_id,
                    owner=owner,
                    status="queued",
                    batch_id=None,
                    questions=json.dumps(questions, ensure_ascii=False),  # searchable as typed
                    results=None,
                    error=None,
                    created_at=at,
                    updated_at=at,
                    follow_up_of=follow_up_of,
                )
            )
            self._append(
                conn,
                run_id,
                None,
                "run_progress",
                {"stage": "queued", "done": 0, "total": len(questions)},
            )
        self._owners[run_id] = owner
        return self.run(run_id)  # type: ignore[return-value]

    def update_run(
        self,
        run_id: str,
        *,
        status: str,
        expected: tuple[str, ...] | None = None,
        batch_id: str | None = None,
        results: list[dict[str, Any]] | None = None,
        error: dict[str, Any] | None = None,
        event: tuple[str, dict[str, Any]] | None = None,
    ) -> bool:
        """Move a run to ``status`` (only from one of ``expected``, when given) and append ``event``
        in the same transaction. False when the run was not in an expected state."""
        values: dict[str, Any] = {"status": status, "updated_at": _now()}
        if batch_id is not None:
            values["batch_id"] = batch_id
        if results is not None:
            values["results"] = json.dumps(results)
        if error is not None:
            values["error"] = json.dumps(error)
        query = server_runs.update().where(server_runs.c.run_id == run_id)
        if expected is not None:
            query = query.where(server_runs.c.status.in_(expected))
        with self._write() as conn:
            if conn.execute(query.values(**values)).rowcount != 1:
                return False
            if event is not None:
                self._append(conn, run_id, batch_id, event[0], event[1])
        return True

    def run(self, run_id: str) -> RunRow | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(server_runs).where(server_runs.c.run_id == run_id)).first()
        return _run_row(row) if row is not None else None

    def runs(
        self,
        *,
        owner: str | None = None,
        limit: int = 50,
        offset: int = 0,
        q: str | None = None,
    ) -> list[RunRow]:
        """Runs, newest first, a page at a time; ``q`` keeps those whose questions or run id
        contain it (case-insensitive)."""
        query = (
            sa.select(server_runs)
            .order_by(server_runs.c.created_at.desc(), server_runs.c.run_id.desc())
            .limit(limit)
            .offset(offset)
        )
        if owner is not None:
            query = query.where(server_runs.c.owner == owner)
        if q:
            escaped = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            pattern = f"%{escaped}%"
            query = query.where(
                sa.or_(
                    sa.func.lower(server_runs.c.questions).like(pattern, escape="\\"),
                    sa.func.lower(server_runs.c.run_id).like(pattern, escape="\\"),
                )
            )
        with self.engine.connect() as conn:
            return [_run_row(row) for row in conn.execute(query)]

    def follow_ups(self, run_ids: list[str]) -> dict[str, list[str]]:
        """For each of ``run_ids``, the runs started to answer its clarifying questions, oldest
        first (one query)."""
        found: dict[str, list[str]] = {run_id: [] for run_id in run_ids}
        if not run_ids:
            return found
        query = (
            sa.select(server_runs.c.run_id, server_runs.c.follow_up_of)
            .where(server_runs.c.follow_up_of.in_(run_ids))
            .order_by(server_runs.c.created_at)
        )
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                found[row.follow_up_of].append(row.run_id)
        return found

    def cached_owner(self, run_id: str) -> str | None:
        """The owner if already known in this process (no query)."""
        return self._owners.get(run_id)

    def owner_of(self, run_id: str) -> str | None:
        """The run's owner (cached: owners never change); None for runs this service never saw."""
        if run_id not in self._owners:
            with self.engine.connect() as conn:
                owner = conn.execute(
                    sa.select(server_runs.c.owner).where(server_runs.c.run_id == run_id)
                ).scalar()
            if owner is None:
                return None
            self._owners[run_id] = owner
        return self._owners[run_id]

    # -- events ------------------------------------------------------------------------------
    def append_event(
        self, run_id: str, batch_id: str | None, event: str, detail: dict[str, Any]
    ) -> None:
        with self._write() as conn:
            self._append(conn, run_id, batch_id, event, detail)

    def _append(
        self,
        conn: Connection,
        run_id: str,
        batch_id: str | None,
        event: str,
        detail: dict[str, Any],
    ) -> None:
        if self.dialect == "postgresql":
            conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({_APPEND_LOCK})"))
        conn.execute(
            server_events.insert().values(
                at=_now(),
                run_id=run_id,
                batch_id=batch_id,
                event=event,
                detail=json.dumps(detail, default=str),
            )
        )

    def events_after(self, seq: int, *, limit: int | None = None) -> list[RunEvent]:
        query = (
            sa.select(server_events).where(server_events.c.seq > seq).order_by(server_events.c.seq)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [
                RunEvent(
                    row.seq,
                    utc(row.at).isoformat(),
                    row.run_id,
                    row.batch_id,
                    row.event,
                    json.loads(row.detail),
                )
                for row in conn.execute(query)
            ]

    def last_event_seq(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(sa.func.max(server_events.c.seq))).scalar() or 0


def _run_row(row: Any) -> RunRow:
    return RunRow(
        run_id=row.run_id,
        owner=row.owner,
        status=row.status,
        batch_id=row.batch_id,
        questions=json.loads(row.questions),
        results=json.loads(row.results) if row.results else None,
        error=json.loads(row.error) if row.error else None,
        created_at=utc(row.created_at).isoformat(),
        updated_at=utc(row.updated_at).isoformat(),
        follow_up_of=row.follow_up_of,
    )
