"""The notification outbox: one row per (event, channel), so every delivery is claimed once.

Every server process follows the same events; the first to insert the row for an event and a
channel delivers it, the others see the row and leave it. The row then records the attempts,
the outcome and the last error, which ``sqlgate runs notifications`` and the reviewer page show.
The channel is stored as a label (a URL without credentials or query, ``email``), never a secret.

Component ``notifications`` of the state database, migrated by ``approvals.migrations.migrate``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from approvals.migrations import migrate, write_transaction

__all__ = ["DeliveryRecord", "NotificationStore"]

DeliveryStatus = Literal["sending", "delivered", "failed"]

_meta = sa.MetaData()
notifications = sa.Table(
    "sqlgate_notifications",
    _meta,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("origin", sa.String(64), nullable=False),  # the event: "audit:17", "run:4"
    sa.Column("channel", sa.String(300), nullable=False),
    sa.Column("event", sa.String(32), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=False, index=True),
    sa.Column("batch_id", sa.String(64), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),
    sa.UniqueConstraint("origin", "channel", name="uq_sqlgate_notifications_origin_channel"),
)


def _v1(conn: Connection) -> None:
    _meta.create_all(conn, tables=[notifications], checkfirst=True)


MIGRATIONS = (_v1,)


@dataclass(frozen=True)
class DeliveryRecord:
    """One notification to one channel, as the outbox holds it."""

    id: int
    origin: str
    channel: str
    event: str
    run_id: str
    batch_id: str | None
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    payload: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "event": self.event,
            "channel": self.channel,
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


class NotificationStore:
    """The outbox table on the state database's engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready = False

    def setup(self) -> None:
        """Create or migrate the table (the ``notifications`` component); safe to call twice."""
        if not self._ready:
            migrate(self.engine, "notifications", MIGRATIONS)
            self._ready = True

    def claim(
        self,
        origin: str,
        channel: str,
        event: str,
        run_id: str,
        batch_id: str | None,
        payload: dict[str, Any],
        *,
        now: datetime | None = None,
    ) -> int | None:
        """Record a delivery about to be sent; its id, or None when another process has it."""
        moment = now or datetime.now(UTC)
        try:
            with write_transaction(self.engine) as conn:
                result = conn.execute(
                    sa.insert(notifications).values(
                        origin=origin,
                        channel=channel,
                        event=event,
                        run_id=run_id,
                        batch_id=batch_id,
                        status="sending",
                        attempts=0,
                        created_at=moment,
                        updated_at=moment,
                        payload=json.dumps(payload, sort_keys=True),
                    )
                )
                key = result.inserted_primary_key
                return int(key[0]) if key else None
        except sa_exc.IntegrityError:
            return None

    def attempted(self, delivery_id: int, status: DeliveryStatus, error: str | None = None) -> None:
        """Count one attempt and record where the delivery stands."""
        with write_transaction(self.engine) as conn:
            conn.execute(
                sa.update(notifications)
                .where(notifications.c.id == delivery_id)
                .values(
                    attempts=notifications.c.attempts + 1,
                    status=status,
                    last_error=error,
                    updated_at=datetime.now(UTC),
                )
            )

    def list(
        self,
        *,
        status: str | None = None,
        run_id: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[DeliveryRecord]:
        """Deliveries, newest first."""
        query = sa.select(notifications).order_by(notifications.c.id.desc())
        if status is not None:
            query = query.where(notifications.c.status == status)
        if run_id is not None:
            query = query.where(notifications.c.run_id == run_id)
        query = query.limit(limit).offset(offset)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            DeliveryRecord(
                id=r.id,
                origin=r.origin,
                channel=r.channel,
                event=r.event,
                run_id=r.run_id,
                batch_id=r.batch_id,
                status=r.status,
                attempts=r.attempts,
                last_error=r.last_error,
                created_at=_aware(r.created_at),
                updated_at=_aware(r.updated_at),
                payload=json.loads(r.payload),
            )
            for r in rows
        ]

    def count(self, *, status: str) -> int:
        with self.engine.connect() as conn:
            query = sa.select(sa.func.count()).where(notifications.c.status == status)
            return int(conn.execute(query.select_from(notifications)).scalar() or 0)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
