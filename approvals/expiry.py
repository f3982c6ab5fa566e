"""Deadlines: a pending batch past its deadline gets its one configured action, exactly once.

The action (``batch.on_expiry``: ``reject`` by default, or ``approve``) is applied through the
same conditional update as a decision, so a decision that lands first turns the expiry into a
no-op and vice versa. The deadline is stored with the batch: a sweeper started after a
restart still fires it.

Example:
    >>> from approvals.store import MemoryApprovalStore
    >>> sweeper = ExpirySweeper(MemoryApprovalStore(), clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    >>> sweeper.sweep()
    []
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from .audit import resolution_events
from .decisions import settled_resolution
from .errors import DecisionConflict
from .models import ApprovalBatch, ApprovalOutcome, BatchRecord, ItemCategory, Resolution
from .store import ApprovalStore

SWEEPER_ACTOR = "sqlgate-expiry"


def expiry_resolutions(batch: ApprovalBatch) -> dict[str, Resolution]:
    """Every item's resolution when the deadline passes: the batch's action on pending items."""
    resolutions: dict[str, Resolution] = {}
    when = batch.deadline.isoformat() if batch.deadline else "the deadline"
    for item in batch.items:
        if batch.categories[item.call_id] is not ItemCategory.NEEDS_APPROVAL:
            resolutions[item.call_id] = settled_resolution(batch, item)
        elif batch.on_expiry == "approve":
            resolutions[item.call_id] = Resolution(
                call_id=item.call_id,
                question_id=item.question_id,
                status="approved",
                sql=item.sql,
                sql_hash=item.sql_hash,
                reason=f"approved on expiry at {when}",
                findings=item.findings,
            )
        else:
            resolutions[item.call_id] = Resolution(
                call_id=item.call_id,
                question_id=item.question_id,
                status="rejected",
                reason=f"expired: no decision before {when}",
                findings=item.findings,
            )
    return resolutions


def expire(
    store: ApprovalStore, record: BatchRecord, now: datetime, actor: str = SWEEPER_ACTOR
) -> ApprovalOutcome | None:
    """Apply the expiry action to ``record`` if it is still pending at its version and due.

    Returns the expired outcome, or None when it was not due or something else won.
    """
    batch = record.batch
    if record.status != "pending" or batch.deadline is None or now < batch.deadline:
        return None
    return _close(store, record, expiry_resolutions(batch), now, actor, {"action": batch.on_expiry})


def supersede(
    store: ApprovalStore, record: BatchRecord, now: datetime, *, reason: str, actor: str
) -> ApprovalOutcome | None:
    """Close a pending batch that no run will ever resume (its run was taken over and starts the
    cycle again): every item waiting is rejected with ``reason``, through the same conditional
    update as a decision. None when the batch was no longer pending."""
    batch = record.batch
    if record.status != "pending":
        return None
    resolutions = {
        item.call_id: (
            settled_resolution(batch, item)
            if batch.categories[item.call_id] is not ItemCategory.NEEDS_APPROVAL
            else Resolution(
                call_id=item.call_id,
                question_id=item.question_id,
                status="rejected",
                reason=f"superseded: {reason}",
                findings=item.findings,
            )
        )
        for item in batch.items
    }
    return _close(
        store, record, resolutions, now, actor, {"action": "superseded", "reason": reason}
    )


def _close(
    store: ApprovalStore,
    record: BatchRecord,
    resolutions: dict[str, Resolution],
    now: datetime,
    actor: str,
    detail: dict[str, str],
) -> ApprovalOutcome | None:
    """End a pending batch as ``expired`` with ``resolutions`` (one conditional update)."""
    batch = record.batch
    outcome = ApprovalOutcome(
        batch_id=batch.batch_id,
        run_id=batch.run_id,
        cycle=batch.cycle,
        status="expired",
        resolutions=resolutions,
        decided_by=actor,
        decided_at=now,
        votes=len(record.votes),
        quorum=batch.quorum,
    )
    events = resolution_events(
        batch, resolutions, actor=actor, at=now, event="batch_expired", detail=detail
    )
    try:
        stored = store.resolve(
            batch.batch_id,
            expected_version=record.version,
            outcome=outcome,
            events=events,
            status="expired",
        )
    except DecisionConflict:
        return None
    return stored.outcome


class ExpirySweeper:
    """Expire every due batch. Run ``sweep()`` periodically (any process, any number of them)."""

    def __init__(
        self,
        store: ApprovalStore,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        actor: str = SWEEPER_ACTOR,
    ) -> None:
        self.store = store
        self.clock = clock
        self.actor = actor

    def sweep(self, *, limit: int | None = None) -> list[ApprovalOutcome]:
        """The outcomes this sweep applied (empty when nothing was due or others won)."""
        now = self.clock()
        applied = []
        for record in self.store.due_batches(now, limit=limit):
            outcome = expire(self.store, record, now, self.actor)
            if outcome is not None:
                applied.append(outcome)
        return applied
