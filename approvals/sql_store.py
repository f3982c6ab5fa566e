"""The durable store: SQLAlchemy over a SQLite file (default) or PostgreSQL (by URL).

A run paused at the gate can be resumed by another process: batches, their state and the
audit log live in three tables. The schema is a versioned list of migrations (component
``approvals``) applied by the state database's one migration runner (``approvals.migrations``)
from ``setup()``: idempotent, safe to run from several processes at once. A decision moves a
batch on with one conditional UPDATE on (status, version): of concurrent submitters exactly
one updates a row, the others see a conflict.

Example:
    >>> store = SqlApprovalStore("sqlite://")
    >>> store.setup(); store.setup()
    >>> store.schema_version()
    5
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from pydantic import TypeAdapter
from sqlalchemy.engine import Connection, Engine

from .migrations import migrate, schema_version, state_engine, to_timestamp, write_transaction
from .models import (
    ApprovalBatch,
    ApprovalOutcome,
    AuditEvent,
    BatchRecord,
    BatchStatus,
    BatchSummary,
    ExecutionRecord,
    Vote,
)
from .notify import (
    CHANNEL,
    DecisionSignals,
    DecisionWatch,
    WakeReason,
    listener_for,
    release_listener,
    signals_for,
)
from .retried import tried_again
from .risk import RISK_LEVELS
from .store import ApprovalStore, CallLocation

_VOTES = TypeAdapter(list[Vote])
DEFAULT_URL_ENV = "SQLGATE_APPROVALS_URL"
DEFAULT_PATH = Path(".sqlgate") / "approvals.sqlite3"

# The latest schema, used by queries. Migrations below carry their own frozen DDL.
metadata = sa.MetaData()

#: Where versions were recorded before the shared ``sqlgate_schema`` table (read once, to adopt).
schema_versions = sa.Table(
    "sqlgate_approval_schema",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.String(40), nullable=False),
)


#: How a time is stored: fixed-width ISO text up to schema version 3, a timestamp from version 4.
_TEXT_TIME = sa.String(40)
_TIMESTAMP = sa.DateTime(timezone=True)


def _batches_table(
    meta: sa.MetaData,
    *,
    with_votes: bool,
    with_counts: bool = False,
    time: sa.types.TypeEngine = _TEXT_TIME,
) -> sa.Table:
    return sa.Table(
        "sqlgate_approval_batches",
        meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),  # creation order
        sa.Column("batch_id", sa.String(64), nullable=False, unique=True),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("cycle", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("created_at", time, nullable=False),
        sa.Column("deadline", time, nullable=True),
        sa.Column("batch", sa.Text, nullable=False),
        sa.Column("outcome", sa.Text, nullable=True),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        sa.Column("decision_digest", sa.String(64), nullable=True),
        *([sa.Column("votes", sa.Text, nullable=True)] if with_votes else []),
        *(
            [
                sa.Column("pending_count", sa.Integer, nullable=False, server_default="0"),
                sa.Column("vote_count", sa.Integer, nullable=False, server_default="0"),
                sa.Column("quorum", sa.Integer, nullable=False, server_default="1"),
            ]
            if with_counts
            else []
        ),
        sa.Index("ix_sqlgate_approval_batches_status_id", "status", "id"),
    )


def _calls_table(meta: sa.MetaData) -> sa.Table:
    return sa.Table(
        "sqlgate_approval_calls",
        meta,
        sa.Column("call_id", sa.String(64), primary_key=True),
        sa.Column("batch_id", sa.String(64), nullable=False, index=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("cycle", sa.Integer, nullable=False),
    )


def _audit_table(meta: sa.MetaData, *, time: sa.types.TypeEngine = _TEXT_TIME) -> sa.Table:
    return sa.Table(
        "sqlgate_approval_audit",
        meta,
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", time, nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("batch_id", sa.String(64), nullable=False, index=True),
        sa.Column("call_id", sa.String(64), nullable=True),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )


def _executions_table(
    meta: sa.MetaData, *, time: sa.types.TypeEngine = _TEXT_TIME, with_claims: bool = False
) -> sa.Table:
    return sa.Table(
        "sqlgate_approval_executions",
        meta,
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),  # claim order
        sa.Column("call_id", sa.String(64), nullable=False, unique=True),
        sa.Column("batch_id", sa.String(64), nullable=False, index=True),
        sa.Column("run_id", sa.String(64), nullable=False, index=True),
        sa.Column("sql_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("started_at", time, nullable=False),
        sa.Column("finished_at", time, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        *(
            [
                sa.Column("claim", sa.String(64), nullable=False, server_default=""),
                sa.Column("sent_at", time, nullable=True),
            ]
            if with_claims
            else []
        ),
    )


batches = _batches_table(metadata, with_votes=True, with_counts=True, time=_TIMESTAMP)
calls = _calls_table(metadata)
audit = _audit_table(metadata, time=_TIMESTAMP)
executions = _executions_table(metadata, time=_TIMESTAMP, with_claims=True)


def _v1(conn: Connection) -> None:
    """Batches, issued call_ids, the audit log."""
    v1 = sa.MetaData()
    for table in (_batches_table(v1, with_votes=False), _calls_table(v1), _audit_table(v1)):
        table.create(conn, checkfirst=True)


def _v2(conn: Connection) -> None:
    """Quorum votes on the batch row; the execution ledger."""
    conn.exec_driver_sql("ALTER TABLE sqlgate_approval_batches ADD COLUMN votes TEXT")
    _executions_table(sa.MetaData()).create(conn, checkfirst=True)


def _v3(conn: Connection) -> None:
    """Counts on the batch row, so listing thousands of batches needs no JSON parsing."""
    for column, default in (("pending_count", 0), ("vote_count", 0), ("quorum", 1)):
        conn.exec_driver_sql(
            f"ALTER TABLE sqlgate_approval_batches ADD COLUMN {column} INTEGER NOT NULL DEFAULT {default}"
        )
    rows = conn.execute(sa.select(batches.c.batch_id, batches.c.batch, batches.c.votes)).all()
    for row in rows:
        batch = ApprovalBatch.model_validate_json(row.batch)
        conn.execute(
            sa.update(batches)
            .where(batches.c.batch_id == row.batch_id)
            .values(
                pending_count=len(batch.pending_ids),
                vote_count=len(_VOTES.validate_json(row.votes)) if row.votes else 0,
                quorum=batch.quorum,
            )
        )


def _v4(conn: Connection) -> None:
    """Times as real timestamp columns instead of fixed-width text, data kept."""
    to_timestamp(
        conn,
        "sqlgate_approval_batches",
        "batch_id",
        ["created_at", "deadline"],
        nullable=["deadline"],
    )
    to_timestamp(conn, "sqlgate_approval_audit", "seq", ["at"])
    to_timestamp(
        conn,
        "sqlgate_approval_executions",
        "call_id",
        ["started_at", "finished_at"],
        nullable=["finished_at"],
    )


def _v5(conn: Connection) -> None:
    """Ledger claims carry their own token, and the moment their statement was sent."""
    sent_at = "TIMESTAMPTZ" if conn.dialect.name == "postgresql" else "DATETIME"
    conn.exec_driver_sql(
        "ALTER TABLE sqlgate_approval_executions ADD COLUMN claim VARCHAR(64) NOT NULL DEFAULT ''"
    )
    conn.exec_driver_sql(f"ALTER TABLE sqlgate_approval_executions ADD COLUMN sent_at {sent_at}")


# Append only; never edit a migration that has shipped.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_v1, _v2, _v3, _v4, _v5)


def _adopt_legacy_version(conn: Connection) -> int:
    """The version a store written before ``sqlgate_schema`` recorded in its own table."""
    if not sa.inspect(conn).has_table(schema_versions.name):
        return 0
    return conn.execute(sa.select(sa.func.max(schema_versions.c.version))).scalar() or 0


def default_store_url() -> str:
    """``$SQLGATE_APPROVALS_URL``, else a SQLite file ``.sqlgate/approvals.sqlite3`` here."""
    return os.environ.get(DEFAULT_URL_ENV) or f"sqlite:///{DEFAULT_PATH}"


def _utc(moment: datetime) -> datetime:
    """A time as it is written: UTC (SQLite keeps no offset, so every stored time is UTC)."""
    return moment.astimezone(UTC)


def _aware(stored: datetime) -> datetime:
    """A stored time read back, aware (SQLite returns it without its UTC offset)."""
    return stored if stored.tzinfo else stored.replace(tzinfo=UTC)


def _time(stored: datetime | None) -> datetime | None:
    return _aware(stored) if stored is not None else None


class SqlApprovalStore(ApprovalStore):
    """Batches, state and the audit log in a SQL database (SQLite or PostgreSQL).

    ``url_or_engine``: a SQLAlchemy URL (``sqlite:///path``, ``postgresql+psycopg://…``) or an
    engine. Call ``setup()`` once before use (it is cheap and idempotent).

    A batch that moves on wakes its waiters in this process (``signals``: default, the one
    ``DecisionSignals`` of this database in the process) and, on PostgreSQL, in every process
    (``NOTIFY`` in the same transaction). ``notify=False`` sends neither: waiters then learn by
    polling, as they do from a writer of an older version.
    """

    def __init__(
        self,
        url_or_engine: str | Engine | None = None,
        *,
        signals: DecisionSignals | None = None,
        notify: bool = True,
    ) -> None:
        if isinstance(url_or_engine, Engine):
            self.engine = url_or_engine
        else:
            self.engine = state_engine(url_or_engine or default_store_url())
        self.dialect = self.engine.dialect.name
        self._key = self.engine.url.render_as_string(hide_password=True)
        self._signals = signals if signals is not None else signals_for(self._key)
        self.notify = notify
        # Only PostgreSQL tells other processes; elsewhere they are polled for, more often.
        self.wait_poll = 5.0 if self._listens else 0.5

    # -- notifications -----------------------------------------------------------------------
    @property
    def _listens(self) -> bool:
        return self.dialect == "postgresql" and self.engine.driver == "psycopg"

    def decision_signals(self) -> DecisionSignals:
        return self._signals

    def watch(self, batch_id: str) -> DecisionWatch:
        """Subscribe to ``batch_id``; on PostgreSQL the process's listener is running first
        (and is let go when the watch closes)."""
        if not self._listens:
            return super().watch(batch_id)
        listener_for(self._key, self._listen_connection)
        return DecisionWatch(
            self.decision_signals(), batch_id, on_close=lambda: release_listener(self._key)
        )

    def on_decisions(self, wake: Callable[[WakeReason], None]) -> Callable[[], None]:
        if not self._listens:
            return super().on_decisions(wake)
        listener_for(self._key, self._listen_connection)
        unsubscribe = super().on_decisions(wake)
        done = threading.Event()

        def stop() -> None:
            if not done.is_set():
                done.set()
                unsubscribe()
                release_listener(self._key)

        return stop

    def _listen_connection(self) -> object:
        import psycopg

        url = self.engine.url.set(drivername="postgresql")
        return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)

    def _announce(self, batch_id: str) -> None:
        if self.notify:
            super()._announce(batch_id)

    # -- schema ----------------------------------------------------------------------------
    def setup(self) -> None:
        migrate(self.engine, "approvals", MIGRATIONS, adopt=_adopt_legacy_version)

    def schema_version(self) -> int:
        return schema_version(self.engine, "approvals")

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A write transaction; on SQLite it takes the write lock up front (BEGIN IMMEDIATE)."""
        with write_transaction(self.engine) as conn:
            yield conn

    # -- rows ------------------------------------------------------------------------------
    @staticmethod
    def _record(row: sa.Row) -> BatchRecord:
        return BatchRecord(
            batch=ApprovalBatch.model_validate_json(row.batch),
            status=row.status,
            version=row.version,
            outcome=ApprovalOutcome.model_validate_json(row.outcome) if row.outcome else None,
            idempotency_key=row.idempotency_key,
            decision_digest=row.decision_digest,
            votes=_VOTES.validate_json(row.votes) if row.votes else [],
        )

    @staticmethod
    def _execution(row: sa.Row) -> ExecutionRecord:
        return ExecutionRecord(
            call_id=row.call_id,
            batch_id=row.batch_id,
            run_id=row.run_id,
            sql_hash=row.sql_hash,
            state=row.state,
            actor=row.actor,
            started_at=_time(row.started_at),
            finished_at=_time(row.finished_at),
            detail=row.detail,
            claim=row.claim,
            sent_at=_time(row.sent_at),
        )

    @staticmethod
    def _audit_rows(events: Iterable[AuditEvent]) -> list[dict]:
        return [
            {
                "at": _utc(e.at),
                "run_id": e.run_id,
                "batch_id": e.batch_id,
                "call_id": e.call_id,
                "event": e.event,
                "actor": e.actor,
                "detail": json.dumps(e.detail, sort_keys=True, default=str),
            }
            for e in events
        ]

    def _insert(self, record: BatchRecord, events: Sequence[AuditEvent]) -> None:
        batch = record.batch
        try:
            with self._write() as conn:
                conn.execute(
                    sa.insert(batches).values(
                        batch_id=batch.batch_id,
                        run_id=batch.run_id,
                        cycle=batch.cycle,
                        status=record.status,
                        version=record.version,
                        created_at=_utc(batch.created_at),
                        deadline=_utc(batch.deadline) if batch.deadline else None,
                        batch=batch.model_dump_json(),
                        outcome=record.outcome.model_dump_json() if record.outcome else None,
                        pending_count=len(batch.pending_ids),
                        vote_count=len(record.votes),
                        quorum=batch.quorum,
                    )
                )
                if batch.items:
                    conn.execute(
                        sa.insert(calls),
                        [
                            {
                                "call_id": i.call_id,
                                "batch_id": batch.batch_id,
                                "run_id": batch.run_id,
                                "cycle": batch.cycle,
                            }
                            for i in batch.items
                        ],
                    )
                if events:
                    self._append(conn, events)
        except sa.exc.IntegrityError as exc:
            if tried_again() and self._load(batch.batch_id) == record:
                return  # tried again after a lost connection whose commit went through
            raise ValueError(
                f"batch {batch.batch_id} or one of its call_ids already exists"
            ) from exc

    def _load(self, batch_id: str) -> BatchRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(batches).where(batches.c.batch_id == batch_id)).first()
        return self._record(row) if row is not None else None

    def _compare_and_set(
        self, expected_version: int, record: BatchRecord, events: Sequence[AuditEvent]
    ) -> bool:
        with self._write() as conn:
            updated = conn.execute(
                sa.update(batches)
                .where(
                    batches.c.batch_id == record.batch_id,
                    batches.c.status == "pending",
                    batches.c.version == expected_version,
                )
                .values(
                    status=record.status,
                    version=record.version,
                    outcome=record.outcome.model_dump_json() if record.outcome else None,
                    idempotency_key=record.idempotency_key,
                    decision_digest=record.decision_digest,
                    votes=_VOTES.dump_json(record.votes).decode() if record.votes else None,
                    vote_count=len(record.votes),
                    # the batch itself, with the quorum its (edited) statements now need
                    batch=record.batch.model_dump_json(),
                    quorum=record.batch.quorum,
                )
            )
            if updated.rowcount != 1:
                return False
            if events:
                self._append(conn, events)
            if self.notify and self.dialect == "postgresql":  # delivered when this commits
                conn.execute(
                    sa.text("SELECT pg_notify(:channel, :batch_id)"),
                    {"channel": CHANNEL, "batch_id": record.batch_id},
                )
            return True

    def _select(
        self, status: BatchStatus | None, run_id: str | None, limit: int | None
    ) -> list[BatchRecord]:
        query = sa.select(batches).order_by(batches.c.id)
        if status is not None:
            query = query.where(batches.c.status == status)
        if run_id is not None:
            query = query.where(batches.c.run_id == run_id)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [self._record(row) for row in conn.execute(query)]

    def locate_call(self, call_id: str) -> CallLocation | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(calls).where(calls.c.call_id == call_id)).first()
        return CallLocation(row.batch_id, row.run_id, row.cycle) if row is not None else None

    def locate_calls(self, call_ids: Sequence[str]) -> dict[str, CallLocation]:
        """One query whatever the number of ids: they travel as one JSON array parameter."""
        if not call_ids:
            return {}
        wanted = json.dumps(list(dict.fromkeys(call_ids)))
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB  # not loaded for other engines

            ids = sa.select(sa.func.jsonb_array_elements_text(sa.cast(sa.literal(wanted), JSONB)))
        else:
            ids = sa.select(sa.column("value")).select_from(sa.func.json_each(sa.literal(wanted)))
        query = sa.select(calls).where(calls.c.call_id.in_(ids))
        with self.engine.connect() as conn:
            return {
                row.call_id: CallLocation(row.batch_id, row.run_id, row.cycle)
                for row in conn.execute(query)
            }

    def list_summaries(
        self,
        *,
        status: BatchStatus | None = "pending",
        run_id: str | None = None,
        limit: int | None = None,
    ) -> list[BatchSummary]:
        c = batches.c
        query = sa.select(
            c.batch_id,
            c.run_id,
            c.cycle,
            c.status,
            c.version,
            c.created_at,
            c.deadline,
            c.pending_count,
            c.vote_count,
            c.quorum,
            c.batch,
        ).order_by(c.id)
        if status is not None:
            query = query.where(c.status == status)
        if run_id is not None:
            query = query.where(c.run_id == run_id)
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            BatchSummary(
                batch_id,
                run_id_,
                cycle,
                status_,
                version,
                _aware(created),
                _time(deadline),
                pending,
                votes,
                quorum,
                _pending_risk(payload),
            )
            for (
                batch_id,
                run_id_,
                cycle,
                status_,
                version,
                created,
                deadline,
                pending,
                votes,
                quorum,
                payload,
            ) in rows
        ]

    def count_batches(self, status: BatchStatus | None = "pending") -> int:
        query = sa.select(sa.func.count()).select_from(batches)
        if status is not None:
            query = query.where(batches.c.status == status)
        with self.engine.connect() as conn:
            return conn.execute(query).scalar() or 0

    def last_cycle(self, run_id: str) -> int:
        with self.engine.connect() as conn:
            query = sa.select(sa.func.max(batches.c.cycle)).where(batches.c.run_id == run_id)
            return conn.execute(query).scalar() or 0

    def due_batches(self, now: datetime, *, limit: int | None = None) -> list[BatchRecord]:
        query = (
            sa.select(batches)
            .where(
                batches.c.status == "pending",
                batches.c.deadline.is_not(None),
                batches.c.deadline <= _utc(now),
            )
            .order_by(batches.c.id)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.engine.connect() as conn:
            return [self._record(row) for row in conn.execute(query)]

    # -- execution ledger -------------------------------------------------------------------
    def _execution_values(self, record: ExecutionRecord) -> dict:
        return {
            "call_id": record.call_id,
            "batch_id": record.batch_id,
            "run_id": record.run_id,
            "sql_hash": record.sql_hash,
            "state": record.state,
            "actor": record.actor,
            "started_at": _utc(record.started_at),
            "finished_at": _utc(record.finished_at) if record.finished_at else None,
            "detail": record.detail,
            "claim": record.claim,
            "sent_at": _utc(record.sent_at) if record.sent_at else None,
        }

    def _claim_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent]) -> bool:
        try:
            with self._write() as conn:
                conn.execute(sa.insert(executions).values(**self._execution_values(record)))
                if events:
                    self._append(conn, events)
        except sa.exc.IntegrityError:
            return False  # claimed before (by another claim, or by this one's lost answer)
        return True

    def _settle_execution(
        self, record: ExecutionRecord, from_state: str, events: Sequence[AuditEvent]
    ) -> bool:
        with self._write() as conn:
            values = self._execution_values(record)
            del values["call_id"]
            updated = conn.execute(
                sa.update(executions)
                .where(
                    executions.c.call_id == record.call_id,
                    executions.c.state == from_state,
                    executions.c.claim == record.claim,
                )
                .values(**values)
            )
            if updated.rowcount != 1:
                return False
            if events:
                self._append(conn, events)
            return True

    def _release_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent]) -> bool:
        with self._write() as conn:
            deleted = conn.execute(
                sa.delete(executions).where(
                    executions.c.call_id == record.call_id,
                    executions.c.state == "claimed",
                    executions.c.claim == record.claim,
                )
            )
            if deleted.rowcount != 1:
                return False
            if events:
                self._append(conn, events)
            return True

    def _load_execution(self, conn: Connection, call_id: str) -> ExecutionRecord | None:
        row = conn.execute(sa.select(executions).where(executions.c.call_id == call_id)).first()
        return self._execution(row) if row is not None else None

    def execution(self, call_id: str) -> ExecutionRecord | None:
        with self.engine.connect() as conn:
            return self._load_execution(conn, call_id)

    def executions(
        self, *, batch_id: str | None = None, run_id: str | None = None
    ) -> list[ExecutionRecord]:
        query = sa.select(executions).order_by(executions.c.seq)
        if batch_id is not None:
            query = query.where(executions.c.batch_id == batch_id)
        if run_id is not None:
            query = query.where(executions.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [self._execution(row) for row in conn.execute(query)]

    def append_audit(self, events: Iterable[AuditEvent]) -> None:
        events = list(events)
        if events:
            with self._write() as conn:
                self._append(conn, events)

    def _append(self, conn: Connection, events: Iterable[AuditEvent]) -> None:
        """Append audit rows at the end of a write transaction.

        On PostgreSQL the appends are serialised (a transaction-scoped advisory lock held until
        commit), so ``seq`` order is commit order and a reader following ``after=seq`` never
        skips an event committed late with a smaller number. SQLite has one writer anyway.
        """
        rows = self._audit_rows(events)
        if not rows:
            return
        if self.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(7313200502)"))
        conn.execute(sa.insert(audit), rows)

    def audit_log(
        self, *, batch_id: str | None = None, run_id: str | None = None, after: int | None = None
    ) -> list[AuditEvent]:
        query = sa.select(audit).order_by(audit.c.seq)
        if after is not None:
            query = query.where(audit.c.seq > after)
        if batch_id is not None:
            query = query.where(audit.c.batch_id == batch_id)
        if run_id is not None:
            query = query.where(audit.c.run_id == run_id)
        with self.engine.connect() as conn:
            return [
                AuditEvent(
                    seq=row.seq,
                    at=_time(row.at),
                    run_id=row.run_id,
                    batch_id=row.batch_id,
                    call_id=row.call_id,
                    event=row.event,
                    actor=row.actor,
                    detail=json.loads(row.detail),
                )
                for row in conn.execute(query)
            ]

    def close(self) -> None:
        self.engine.dispose()


def _pending_risk(payload: str) -> str | None:
    """The highest risk level among a stored batch's pending items (its JSON, not the model)."""
    data = json.loads(payload)
    pending = {
        cid for cid, category in data.get("categories", {}).items() if category == "needs_approval"
    }
    levels = [
        item["risk"]["level"]
        for item in data.get("items", [])
        if item.get("call_id") in pending and isinstance(item.get("risk"), dict)
    ]
    return max(levels, key=RISK_LEVELS.index) if levels else None
