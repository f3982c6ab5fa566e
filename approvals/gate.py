"""The batched approval gate: one cycle per call, the reviewer asked at most once.

``ApprovalGate.review(items)`` opens a batch (every item validated again and categorised:
denied / auto-approved / needs approval), asks the reviewer ONCE when anything needs approval,
checks the decision covers exactly the pending set, re-validates edits, and records the result
in the store with a conditional update. What may run is then ``outcome.runnable(call_id)``.

``open`` and ``submit`` are the two halves, for a decision that arrives later or from another
process (a reviewer's command line, an HTTP endpoint).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .decisions import (
    Validate,
    decision_digest,
    normalise_decisions,
    refusal_text,
    resolve_decisions,
    settled_resolution,
)
from .models import (
    ApprovalBatch,
    ApprovalItem,
    ApprovalOutcome,
    AuditEvent,
    ItemCategory,
    Resolution,
    findings_of,
    new_id,
    sql_hash,
)
from .policy import Policy
from .store import ApprovalStore, MemoryApprovalStore

Reviewer = Callable[[ApprovalBatch], Mapping[str, Any] | Iterable[tuple[str, Any]]]
Clock = Callable[[], datetime]

SYSTEM_ACTOR = "sqlgate"


def utc_now() -> datetime:
    return datetime.now(UTC)


class ApprovalGate:
    """One run's approval gate.

    ``reviewer(batch) -> {call_id: decision}`` is asked once per cycle, only when something needs
    approval. ``validate(sql)`` is the safety validator (``SqlValidator.validate`` fits).
    ``policy`` auto-approves explicitly (None: nothing is auto-approved). ``store`` defaults to
    a fresh ``MemoryApprovalStore``; ``clock`` returns aware datetimes.
    """

    def __init__(
        self,
        reviewer: Reviewer | None,
        validate: Validate,
        policy: Policy | None = None,
        store: ApprovalStore | None = None,
        clock: Clock = utc_now,
        *,
        run_id: str | None = None,
        actor: str = "reviewer",
    ) -> None:
        self.reviewer = reviewer
        self.validate = validate
        self.policy = policy
        self.store = store if store is not None else MemoryApprovalStore()
        self.clock = clock
        self.run_id = run_id or new_id("run")
        self.actor = actor

    # -- one whole cycle -------------------------------------------------------------------
    def review(self, items: Sequence[ApprovalItem]) -> ApprovalOutcome:
        """Open a batch of ``items``, ask the reviewer once if needed, return the outcome.

        Raises ``DecisionError`` when the reviewer's decision is refused (the batch stays
        pending, nothing runs) and ``ApprovalCancelled`` when the reviewer cancels.
        """
        batch = self.open(items)
        if not batch.pending:
            return self.outcome(batch.batch_id)
        if self.reviewer is None:
            raise RuntimeError("this gate has no reviewer; submit the decision with submit()")
        decisions = self.reviewer(batch)
        return self.submit(batch.batch_id, decisions, actor=self.actor, reviewed=True)

    async def areview(self, items: Sequence[ApprovalItem]) -> ApprovalOutcome:
        """``review`` in a worker thread, so a prompt or validator never blocks the event loop."""
        return await asyncio.to_thread(self.review, items)

    # -- the two halves --------------------------------------------------------------------
    def open(self, items: Sequence[ApprovalItem]) -> ApprovalBatch:
        """Categorise ``items`` into a new batch of the next cycle and store it.

        A batch with nothing pending is resolved at once (denied and auto-approved items).
        """
        ids = [i.call_id for i in items]
        if len(set(ids)) != len(ids):
            raise ValueError("two items share a call_id; build each with ApprovalItem.new")
        cycle = len(self.store.list_batches(run_id=self.run_id)) + 1
        now = self.clock()
        categorised = [self._categorise(item, cycle) for item in items]
        batch = ApprovalBatch(
            batch_id=new_id("batch"),
            run_id=self.run_id,
            cycle=cycle,
            created_at=now,
            items=[item for item, _, _ in categorised],
            categories={item.call_id: category for item, category, _ in categorised},
            notes={item.call_id: note for item, _, note in categorised if note},
        )
        opened = AuditEvent(
            at=now,
            run_id=batch.run_id,
            batch_id=batch.batch_id,
            event="batch_opened",
            actor=SYSTEM_ACTOR,
            detail={
                "cycle": cycle,
                "pending": batch.pending_ids,
                "denied": [i.call_id for i in batch.denied],
                "auto_approved": [i.call_id for i in batch.auto_approved],
            },
        )
        record = self.store.create_batch(batch, [opened])
        if not batch.pending:
            resolutions = {i.call_id: settled_resolution(batch, i) for i in batch.items}
            self._record(record.version, batch, resolutions, SYSTEM_ACTOR, None, None, reviewed=False)
        return batch

    def submit(
        self,
        batch_id: str,
        decisions: Mapping[str, Any] | Iterable[tuple[str, Any]],
        *,
        actor: str | None = None,
        idempotency_key: str | None = None,
        reviewed: bool = True,
    ) -> ApprovalOutcome:
        """Apply a decision to a pending batch; exactly one submission per batch wins.

        A replay with the winner's idempotency key and the same decision returns the first
        outcome; anything else on a decided batch is a ``DecisionConflict`` (or
        ``IdempotencyConflict``, ``BatchExpired``).
        """
        record = self.store.get_batch(batch_id)
        pairs = normalise_decisions(decisions)
        digest = decision_digest(pairs)
        replayed = self.store.replay(record, idempotency_key, digest)
        if replayed is not None and replayed.outcome is not None:
            return replayed.outcome
        resolutions = resolve_decisions(record.batch, pairs, self.validate, self.store.locate_call)
        return self._record(
            record.version, record.batch, resolutions, actor or self.actor, idempotency_key, digest, reviewed
        )

    def outcome(self, batch_id: str) -> ApprovalOutcome | None:
        """The stored outcome of a batch, or None while it is pending (for resuming a run)."""
        return self.store.get_batch(batch_id).outcome

    # -- internals -------------------------------------------------------------------------
    def _categorise(self, item: ApprovalItem, cycle: int) -> tuple[ApprovalItem, ItemCategory, str | None]:
        if item.cycle != cycle:
            item = item.model_copy(update={"cycle": cycle})
        if item.refused:
            errors = [f for f in item.findings if f.severity == "error"]
            note = f"{errors[0].code}: {errors[0].message}" if errors else "refused by the validator"
            return item, ItemCategory.DENIED, note
        # The gate does not trust its caller: the SQL shown is the SQL the validator would run.
        result = self.validate(item.sql)
        if not result.ok or not result.sql:
            refused = item.model_copy(update={"refused": True, "findings": findings_of(result.findings)})
            return refused, ItemCategory.DENIED, refusal_text(result)
        if result.sql != item.sql:
            known = {(f.code, f.message) for f in item.findings}
            extra = [f for f in findings_of(result.findings) if (f.code, f.message) not in known]
            item = ApprovalItem(
                **item.model_dump(exclude={"sql", "sql_hash", "findings"}),
                sql=result.sql,
                sql_hash=sql_hash(result.sql),
                findings=[*item.findings, *extra],
            )
        if self.policy is not None:
            why = self.policy(item)
            if why:
                return item, ItemCategory.AUTO_APPROVED, why if isinstance(why, str) else "auto-approved by policy"
        return item, ItemCategory.NEEDS_APPROVAL, None

    def _record(
        self,
        version: int,
        batch: ApprovalBatch,
        resolutions: dict[str, Resolution],
        actor: str,
        idempotency_key: str | None,
        digest: str | None,
        reviewed: bool,
    ) -> ApprovalOutcome:
        now = self.clock()
        outcome = ApprovalOutcome(
            batch_id=batch.batch_id,
            run_id=batch.run_id,
            cycle=batch.cycle,
            resolutions=resolutions,
            decided_by=actor,
            decided_at=now,
            reviewed=reviewed,
        )
        events = [
            AuditEvent(
                at=now,
                run_id=batch.run_id,
                batch_id=batch.batch_id,
                call_id=r.call_id,
                event="item_resolved",
                actor=actor if batch.categories[r.call_id] is ItemCategory.NEEDS_APPROVAL else SYSTEM_ACTOR,
                detail={"status": r.status, "sql_hash": r.sql_hash, "reason": r.reason},
            )
            for r in resolutions.values()
        ]
        events.append(
            AuditEvent(
                at=now,
                run_id=batch.run_id,
                batch_id=batch.batch_id,
                event="batch_resolved",
                actor=actor,
                detail={"version": version + 1, "idempotency_key": idempotency_key},
            )
        )
        stored = self.store.resolve(
            batch.batch_id,
            expected_version=version,
            outcome=outcome,
            events=events,
            idempotency_key=idempotency_key,
            decision_digest=digest,
        )
        assert stored.outcome is not None
        return stored.outcome
