"""Distributed batches in the state database: which runs a ``batch --distributed`` command made.

A batch is recorded once, at the start of the command, in one transaction with its runs (each
``queued`` in ``sqlgate_runs`` with its questions): ``sqlgate_batches`` holds the batch (its id,
a digest of its input file and options), ``sqlgate_batch_runs`` its runs in order with their
questions. The batch id is derived from the input file's content and the command's options, so
the same command run again (after a crash, a Ctrl-C, a broker restart) finds the batch and follows
the same runs: the run records, never the results file, say what was asked and what came out.

Its schema is the ``batches`` component of the state database's one migration runner (its own
tables; the runs table is only written through its columns).

Example:
    >>> from approvals.migrations import state_engine
    >>> from orchestrator.core.runs import RunStore
    >>> engine = state_engine("sqlite://")
    >>> RunStore(engine).setup()
    >>> store = BatchStore(engine)
    >>> batch = store.record("batch_x", "sqlite:///shop.db", [["q1", "q2"], ["q3"]], options={})
    >>> batch.created, [r.questions for r in batch.runs]
    (True, [['q1', 'q2'], ['q3']])
    >>> store.record("batch_x", "sqlite:///shop.db", [["other"]], options={}).created
    False
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from approvals.migrations import migrate, write_transaction
from orchestrator.core.checkpoint import StartedCheckpoint, recorded_hints
from orchestrator.core.identity import Identity
from orchestrator.core.run_identity import DatabaseLogin, database_identity
from orchestrator.core.runs import new_run_row
from orchestrator.core.runs import runs as runs_table

__all__ = ["BatchRun", "BatchStore", "RecordedBatch", "batch_id_for"]

_metadata = sa.MetaData()
batches = sa.Table(
    "sqlgate_batches",
    _metadata,
    sa.Column("batch_id", sa.String(64), primary_key=True),
    sa.Column("options", sa.Text, nullable=False),
    sa.Column("questions", sa.Integer, nullable=False),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
batch_runs = sa.Table(
    "sqlgate_batch_runs",
    _metadata,
    sa.Column("batch_id", sa.String(64), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.String(64), nullable=False, unique=True),
    sa.Column("questions", sa.Text, nullable=False),
)


def _v1(conn: Connection) -> None:
    """The batches and their runs."""
    timestamp = "TIMESTAMPTZ" if conn.dialect.name == "postgresql" else "DATETIME"
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS sqlgate_batches (batch_id VARCHAR(64) NOT NULL PRIMARY KEY, "
        "options TEXT NOT NULL, questions INTEGER NOT NULL, runs INTEGER NOT NULL, "
        f"created_at {timestamp} NOT NULL)"
    )
    conn.exec_driver_sql(
        "CREATE TABLE IF NOT EXISTS sqlgate_batch_runs (batch_id VARCHAR(64) NOT NULL, "
        "position INTEGER NOT NULL, run_id VARCHAR(64) NOT NULL UNIQUE, questions TEXT NOT NULL, "
        "PRIMARY KEY (batch_id, position))"
    )


MIGRATIONS = (_v1,)


def batch_id_for(content: bytes, options: dict[str, Any]) -> str:
    """The same input file content and the same options give the same batch id."""
    digest = hashlib.sha256(content)
    digest.update(b"\0" + json.dumps(options, sort_keys=True, default=str).encode())
    return f"batch_{digest.hexdigest()[:24]}"


@dataclass(frozen=True)
class BatchRun:
    """One run of a batch: its id and the questions it was recorded with."""

    run_id: str
    questions: list[str]


@dataclass(frozen=True)
class RecordedBatch:
    """A batch as recorded; ``created`` is False when an earlier command had recorded it."""

    batch_id: str
    runs: list[BatchRun]
    created: bool


class BatchStore:
    """The distributed batches, on the state database's shared engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready = False

    def setup(self) -> None:
        """Create or migrate the tables (the ``batches`` component); safe from many processes."""
        if not self._ready:
            migrate(self.engine, "batches", MIGRATIONS)
            self._ready = True

    def record(
        self,
        batch_id: str,
        database: str,
        chunks: list[list[str]],
        *,
        options: dict[str, Any],
        login: DatabaseLogin,
        identity: Identity | None = None,
        hints: Mapping[str, str] | None = None,
    ) -> RecordedBatch:
        """The batch ``batch_id``: recorded now with one queued run per chunk, in one
        transaction, or as an earlier command recorded it (its chunks then win). Its runs
        execute as ``login`` (a worker logging in otherwise leaves them alone) and are asked
        with the asker's attributes ``identity`` (what the row filters are bound to) and each
        question's hint from ``hints`` (question -> hint), which their workers plan with."""
        self.setup()
        found = self.load(batch_id)
        if found is not None:
            return found
        now = datetime.now(UTC)
        target = database_identity(database)
        recorded = [
            BatchRun(f"run_{batch_id.removeprefix('batch_')}_{i:05d}", questions)
            for i, questions in enumerate(chunks)
        ]
        try:
            with write_transaction(self.engine) as conn:
                if self._load(conn, batch_id) is not None:
                    raise _AlreadyRecorded
                conn.execute(
                    batches.insert().values(
                        batch_id=batch_id,
                        options=json.dumps(options, sort_keys=True, default=str),
                        questions=sum(len(c) for c in chunks),
                        runs=len(chunks),
                        created_at=now,
                    )
                )
                conn.execute(
                    batch_runs.insert(),
                    [
                        {
                            "batch_id": batch_id,
                            "position": i,
                            "run_id": run.run_id,
                            "questions": json.dumps(run.questions, ensure_ascii=False),
                        }
                        for i, run in enumerate(recorded)
                    ],
                )
                conn.execute(
                    runs_table.insert(),
                    [
                        new_run_row(
                            run.run_id,
                            database,
                            StartedCheckpoint(
                                run_id=run.run_id,
                                questions=run.questions,
                                identity=dict(identity) if identity else None,
                                hints=recorded_hints(
                                    [(hints or {}).get(q, "") for q in run.questions],
                                    len(run.questions),
                                ),
                            ),
                            now=now,
                            target=target,
                            login=login,
                        )
                        for run in recorded
                    ],
                )
        except (_AlreadyRecorded, IntegrityError):
            found = self.load(batch_id)  # another command recorded it at the same moment
            if found is None:
                raise
            return found
        return RecordedBatch(batch_id, recorded, created=True)

    def load(self, batch_id: str) -> RecordedBatch | None:
        """The batch's runs in order, or None when it was never recorded."""
        self.setup()
        with self.engine.connect() as conn:
            return self._load(conn, batch_id)

    @staticmethod
    def _load(conn: Connection, batch_id: str) -> RecordedBatch | None:
        if conn.execute(
            sa.select(batches.c.batch_id).where(batches.c.batch_id == batch_id)
        ).first():
            rows = conn.execute(
                sa.select(batch_runs.c.run_id, batch_runs.c.questions)
                .where(batch_runs.c.batch_id == batch_id)
                .order_by(batch_runs.c.position)
            ).all()
            return RecordedBatch(
                batch_id, [BatchRun(r.run_id, json.loads(r.questions)) for r in rows], False
            )
        return None


class _AlreadyRecorded(Exception):
    """Another command recorded the batch between the first look and the write lock."""
