"""Where a run paused at the approval gate waits: a checkpoint that any process can resume.

One row per run in ``sqlgate_runs``: its status, a version bumped by every change, and the
checkpoint (the questions' state as JSON). Changes are conditional on status and version, so two
processes resuming the same run cannot both win. The table lives in sqlgate's state database (a
SQLite file by default, PostgreSQL by URL), beside the approvals store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from orchestrator.checkpoint import Checkpoint, PausedCheckpoint, load_checkpoint
from orchestrator.errors import RunConflict, RunNotFound

#: Run states: ``awaiting_approval`` (resumable), ``resuming`` (claimed by one process), ``finished``.
RUN_STATES = ("awaiting_approval", "resuming", "finished")

_metadata = sa.MetaData()
runs = sa.Table(
    "sqlgate_runs",
    _metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("database", sa.Text, nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=False),
    sa.Column("updated_at", sa.String(40), nullable=False),
)


@dataclass(frozen=True)
class StoredRun:
    """A run as the state database holds it."""

    run_id: str
    status: str
    version: int
    database: str
    checkpoint: Checkpoint
    updated_at: str


class RunStore:
    """Checkpoints of runs, in a SQLAlchemy database shared by every sqlgate process."""

    def __init__(self, url_or_engine: str | Engine) -> None:
        if isinstance(url_or_engine, Engine):
            self.engine = url_or_engine
        else:
            parsed = sa.make_url(url_or_engine)
            if parsed.get_backend_name() == "sqlite" and parsed.database not in (
                None,
                "",
                ":memory:",
            ):
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            self.engine = sa.create_engine(url_or_engine, pool_pre_ping=True)
        self._ready = False

    def setup(self) -> None:
        """Create the table if needed; safe to call any number of times."""
        if not self._ready:
            _metadata.create_all(self.engine, checkfirst=True)
            self._ready = True

    def create(self, run_id: str, database: str, checkpoint: PausedCheckpoint) -> int:
        self.setup()
        with self.engine.begin() as conn:
            conn.execute(
                runs.insert().values(
                    run_id=run_id,
                    status="awaiting_approval",
                    version=1,
                    database=database,
                    checkpoint=checkpoint.model_dump_json(by_alias=True),
                    updated_at=_now(),
                )
            )
        return 1

    def load(self, run_id: str) -> StoredRun:
        """The run's status, version, database and checkpoint (upgraded from older versions)."""
        self.setup()
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(runs).where(runs.c.run_id == run_id)).first()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in the state database")
        return StoredRun(
            run_id=row.run_id,
            status=row.status,
            version=row.version,
            database=row.database,
            checkpoint=load_checkpoint(json.loads(row.checkpoint)),
            updated_at=row.updated_at,
        )

    def transition(
        self,
        run_id: str,
        *,
        expected: tuple[str, int],
        status: str,
        checkpoint: Checkpoint | None = None,
    ) -> int:
        """Move the run to ``status`` if it is still in ``expected`` (status, version); else conflict."""
        self.setup()
        values: dict[str, Any] = {
            "status": status,
            "version": expected[1] + 1,
            "updated_at": _now(),
        }
        if checkpoint is not None:
            values["checkpoint"] = checkpoint.model_dump_json(by_alias=True)
        with self.engine.begin() as conn:
            changed = conn.execute(
                runs.update()
                .where(
                    runs.c.run_id == run_id,
                    runs.c.status == expected[0],
                    runs.c.version == expected[1],
                )
                .values(**values)
            ).rowcount
        if changed != 1:
            raise RunConflict(
                f"run {run_id} changed meanwhile (another process is resuming it, or it finished)"
            )
        return expected[1] + 1

    def list(self, *, status: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        self.setup()
        query = sa.select(runs.c.run_id, runs.c.status, runs.c.database, runs.c.updated_at)
        if status:
            query = query.where(runs.c.status == status)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(runs.c.updated_at.desc()).limit(limit)).all()
        return [dict(r._mapping) for r in rows]


def _now() -> str:
    return datetime.now(UTC).isoformat()
