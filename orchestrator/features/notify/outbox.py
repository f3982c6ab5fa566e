"""The notification outbox: one row per (event, channel), so every delivery is made once.

Every server process follows the same events; the first to insert the row for an event and a
channel holds its *claim* (owner and expiry) and makes the first attempt, the others see the row
and leave it. A failed attempt records when the next one is due and lets the claim go; any
server's sweeper then claims the due deliveries, and takes over a claim whose holder stopped
(the claim expired) — so a delivery outlives the process that started it. After the last attempt
of the retry schedule the delivery is a *dead letter* (status ``failed``): listed by ``sqlgate runs
notifications --failed`` and the reviewer page's banner, sent again by ``--resend``. The
channel is stored as a label (a URL without credentials or query, ``email``), never a secret.

Component ``notifications`` of the state database, migrated by ``approvals.migrations.migrate``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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
    sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
    sa.Column("claimed_by", sa.String(200), nullable=True),
    sa.Column("claim_expires_at", sa.DateTime(timezone=True), nullable=True),
    sa.UniqueConstraint("origin", "channel", name="uq_sqlgate_notifications_origin_channel"),
)


def _v1(conn: Connection) -> None:
    _v1_meta.create_all(conn, checkfirst=True)


#: The table as version 1 made it (the shipped step must keep making exactly that).
_v1_meta = sa.MetaData()
sa.Table(
    "sqlgate_notifications",
    _v1_meta,
    *(
        sa.Column(c.name, c.type, primary_key=c.primary_key, nullable=c.nullable, index=c.index)
        for c in notifications.columns
        if c.name not in ("next_attempt_at", "claimed_by", "claim_expires_at")
    ),
    sa.UniqueConstraint("origin", "channel", name="uq_sqlgate_notifications_origin_channel"),
)


def _v2(conn: Connection) -> None:
    """Claims that expire, and when the next attempt is due (retries outlive a process)."""
    stamp = _timestamp(conn)
    conn.exec_driver_sql(f"ALTER TABLE sqlgate_notifications ADD COLUMN next_attempt_at {stamp}")
    conn.exec_driver_sql("ALTER TABLE sqlgate_notifications ADD COLUMN claimed_by VARCHAR(200)")
    conn.exec_driver_sql(f"ALTER TABLE sqlgate_notifications ADD COLUMN claim_expires_at {stamp}")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_sqlgate_notifications_due "
        "ON sqlgate_notifications (status, next_attempt_at)"
    )


def _timestamp(conn: Connection) -> str:
    return "TIMESTAMPTZ" if conn.dialect.name == "postgresql" else "DATETIME"


MIGRATIONS = (_v1, _v2)


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
    #: When the next attempt is due (``sending``), else None.
    next_attempt_at: datetime | None = None

    @property
    def delivery_id(self) -> str:
        """The id every attempt of this delivery carries (``X-Sqlgate-Delivery``, the e-mail's
        ``Message-ID``): a receiver that remembers it ignores a repeat."""
        return f"n{self.id}"

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "delivery_id": self.delivery_id,
            "event": self.event,
            "channel": self.channel,
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "status": self.status,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "next_attempt_at": self.next_attempt_at.isoformat() if self.next_attempt_at else None,
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
        owner: str = "",
        claim_s: float = 60.0,
        now: datetime | None = None,
    ) -> int | None:
        """Record a delivery about to be sent, claimed by ``owner`` for ``claim_s`` seconds; its
        id, or None when another process recorded it first."""
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
                        next_attempt_at=moment,
                        claimed_by=owner or None,
                        claim_expires_at=moment + timedelta(seconds=claim_s) if owner else None,
                    )
                )
                key = result.inserted_primary_key
                return int(key[0]) if key else None
        except sa_exc.IntegrityError:
            return None

    def take_due(
        self,
        owner: str,
        *,
        channels: Sequence[str],
        now: datetime,
        claim_s: float = 60.0,
        limit: int = 50,
    ) -> list[DeliveryRecord]:
        """Claim for ``owner`` the deliveries to ``channels`` whose next attempt is due and that
        nobody holds (never claimed, let go, or a claim that expired: its process stopped);
        the ones this call got, oldest first."""
        free = sa.or_(
            notifications.c.claimed_by.is_(None),
            notifications.c.claim_expires_at.is_(None),
            notifications.c.claim_expires_at <= now,
        )
        due = sa.and_(
            notifications.c.status == "sending",
            notifications.c.channel.in_(list(channels)),
            sa.or_(
                notifications.c.next_attempt_at.is_(None), notifications.c.next_attempt_at <= now
            ),
            free,
        )
        with self.engine.connect() as conn:
            ids = [
                r.id
                for r in conn.execute(
                    sa.select(notifications.c.id)
                    .where(due)
                    .order_by(notifications.c.id)
                    .limit(limit)
                )
            ]
        taken: list[int] = []
        for delivery_id in ids:
            with write_transaction(self.engine) as conn:
                changed = conn.execute(
                    sa.update(notifications)
                    .where(notifications.c.id == delivery_id, due)
                    .values(claimed_by=owner, claim_expires_at=now + timedelta(seconds=claim_s))
                ).rowcount
            if changed == 1:
                taken.append(delivery_id)
        return self._records(notifications.c.id.in_(taken)) if taken else []

    def attempted(
        self,
        delivery_id: int,
        status: DeliveryStatus,
        error: str | None = None,
        *,
        owner: str | None = None,
        next_attempt_at: datetime | None = None,
        now: datetime | None = None,
    ) -> bool:
        """Count one attempt, record where the delivery stands (the next attempt due at
        ``next_attempt_at``) and let the claim go; False when ``owner`` no longer held it
        (another process took it over: its record stands)."""
        moment = now or datetime.now(UTC)
        held = notifications.c.id == delivery_id
        if owner is not None:
            held = sa.and_(held, notifications.c.claimed_by == owner)
        with write_transaction(self.engine) as conn:
            changed = conn.execute(
                sa.update(notifications)
                .where(held)
                .values(
                    attempts=notifications.c.attempts + 1,
                    status=status,
                    last_error=error,
                    updated_at=moment,
                    next_attempt_at=next_attempt_at,
                    claimed_by=None,
                    claim_expires_at=None,
                )
            ).rowcount
        return changed == 1

    def resend(self, ids: Sequence[int] | None = None, *, now: datetime | None = None) -> list[int]:
        """Dead letters (``failed``; only ``ids`` when given) back to ``sending``, due now, with
        a fresh retry schedule; the ids sent again."""
        moment = now or datetime.now(UTC)
        dead = notifications.c.status == "failed"
        if ids is not None:
            dead = sa.and_(dead, notifications.c.id.in_(list(ids)))
        with write_transaction(self.engine) as conn:
            found = [r.id for r in conn.execute(sa.select(notifications.c.id).where(dead))]
            if found:
                conn.execute(
                    sa.update(notifications)
                    .where(dead, notifications.c.id.in_(found))
                    .values(
                        status="sending",
                        attempts=0,
                        next_attempt_at=moment,
                        claimed_by=None,
                        claim_expires_at=None,
                        updated_at=moment,
                    )
                )
        return found

    def _records(self, where: Any) -> list[DeliveryRecord]:
        query = sa.select(notifications).where(where).order_by(notifications.c.id)
        with self.engine.connect() as conn:
            return [_record(r) for r in conn.execute(query).all()]

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
            return [_record(r) for r in conn.execute(query).all()]

    def count(self, *, status: str) -> int:
        with self.engine.connect() as conn:
            query = sa.select(sa.func.count()).where(notifications.c.status == status)
            return int(conn.execute(query.select_from(notifications)).scalar() or 0)


def _record(r: Any) -> DeliveryRecord:
    return DeliveryRecord(
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
        next_attempt_at=_aware(r.next_attempt_at) if r.next_attempt_at else None,
    )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
