"""The audit log: events for every state change, and a replay that rebuilds state from them.

Every change of a batch or of an execution appends events in the same transaction as the
change itself, so the log and the state cannot disagree. ``replay_audit`` folds a log back
into per-batch state; tests compare it with the store to prove the log is complete. The same
events are what a notification stream (SSE) would publish.

Events: ``batch_opened``, ``vote_cast``, ``batch_reopened`` (an edit needs more reviewers),
``item_resolved``, ``batch_resolved``,
``batch_expired``, ``execution_claimed``, ``execution_sent``, ``execution_done``,
``execution_failed``, ``execution_in_doubt``, ``execution_released`` (a claim never sent, let go
by recovery), and ``execution_started`` in logs written before claims recorded sending.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .models import ApprovalBatch, AuditEvent, ItemCategory, Resolution

SYSTEM_ACTOR = "sqlgate"


def opened_event(batch: ApprovalBatch, at: datetime) -> AuditEvent:
    risk = {i.call_id: i.risk.model_dump(mode="json") for i in batch.items if i.risk}
    return AuditEvent(
        at=at,
        run_id=batch.run_id,
        batch_id=batch.batch_id,
        event="batch_opened",
        actor=SYSTEM_ACTOR,
        detail={
            "cycle": batch.cycle,
            "quorum": batch.quorum,
            "deadline": batch.deadline.isoformat() if batch.deadline else None,
            "pending": batch.pending_ids,
            "denied": [i.call_id for i in batch.denied],
            "auto_approved": [i.call_id for i in batch.auto_approved],
            **({"risk": risk} if risk else {}),
        },
    )


def vote_event(
    batch: ApprovalBatch, actor: str, at: datetime, votes: int, digest: str
) -> AuditEvent:
    return AuditEvent(
        at=at,
        run_id=batch.run_id,
        batch_id=batch.batch_id,
        event="vote_cast",
        actor=actor,
        detail={"votes": votes, "quorum": batch.quorum, "decision_digest": digest},
    )


def reopened_event(
    before: ApprovalBatch,
    after: ApprovalBatch,
    actor: str,
    at: datetime,
) -> AuditEvent:
    """An edit re-opened the batch: which statements changed, their risk as edited, the quorum
    before and after."""
    edited = {
        i.call_id: {
            "sql_hash": i.sql_hash,
            "edited_from_hash": before.item(i.call_id).sql_hash,
            "risk": i.risk.model_dump(mode="json") if i.risk is not None else None,
        }
        for i in after.items
        if i.sql_hash != before.item(i.call_id).sql_hash
    }
    return AuditEvent(
        at=at,
        run_id=after.run_id,
        batch_id=after.batch_id,
        event="batch_reopened",
        actor=actor,
        detail={"quorum_before": before.quorum, "quorum": after.quorum, "edited": edited},
    )


def resolution_events(
    batch: ApprovalBatch,
    resolutions: dict[str, Resolution],
    *,
    actor: str,
    at: datetime,
    event: str = "batch_resolved",
    detail: dict[str, Any] | None = None,
) -> list[AuditEvent]:
    """One ``item_resolved`` per item, then the batch-level event (resolved or expired)."""
    events = [
        AuditEvent(
            at=at,
            run_id=batch.run_id,
            batch_id=batch.batch_id,
            call_id=r.call_id,
            event="item_resolved",
            actor=actor
            if batch.categories[r.call_id] is ItemCategory.NEEDS_APPROVAL
            else SYSTEM_ACTOR,
            detail={
                "status": r.status,
                "sql_hash": r.sql_hash,
                "reason": r.reason,
                **({"risk": r.risk.model_dump(mode="json")} if r.risk is not None else {}),
            },
        )
        for r in resolutions.values()
    ]
    events.append(
        AuditEvent(
            at=at,
            run_id=batch.run_id,
            batch_id=batch.batch_id,
            event=event,
            actor=actor,
            detail=detail or {},
        )
    )
    return events


@dataclass
class ReplayedBatch:
    """A batch's state as the audit log tells it."""

    status: str = "pending"
    pending: list[str] = field(default_factory=list)
    voters: list[str] = field(default_factory=list)
    decided_by: str | None = None
    items: dict[str, tuple[str, str | None, str | None]] = field(
        default_factory=dict
    )  # status, sql_hash, reason
    executions: dict[str, str] = field(default_factory=dict)  # call_id -> ledger state


_EXECUTION_STATES = {
    "execution_claimed": "claimed",
    "execution_sent": "sent",
    "execution_started": "started",
    "execution_done": "done",
    "execution_failed": "failed",
    "execution_in_doubt": "in_doubt",
}


def replay_audit(events: Iterable[AuditEvent]) -> dict[str, ReplayedBatch]:
    """batch_id -> state, folded from the log in order."""
    state: dict[str, ReplayedBatch] = {}
    for e in events:
        batch = state.setdefault(e.batch_id, ReplayedBatch())
        if e.event == "batch_opened":
            batch.pending = list(e.detail.get("pending", []))
        elif e.event == "batch_reopened":
            batch.voters = [e.actor]  # votes on the replaced text no longer count
        elif e.event == "vote_cast":
            batch.voters.append(e.actor)
        elif e.event == "item_resolved" and e.call_id:
            batch.items[e.call_id] = (
                e.detail["status"],
                e.detail.get("sql_hash"),
                e.detail.get("reason"),
            )
        elif e.event in ("batch_resolved", "batch_expired"):
            batch.status = "resolved" if e.event == "batch_resolved" else "expired"
            batch.decided_by = e.actor
        elif e.event in _EXECUTION_STATES and e.call_id:
            batch.executions[e.call_id] = _EXECUTION_STATES[e.event]
        elif e.event == "execution_released" and e.call_id:
            batch.executions.pop(e.call_id, None)
    return state
