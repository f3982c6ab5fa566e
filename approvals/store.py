"""Where batches, their state and the audit log live: one base class, several backends.

``ApprovalStore`` owns the rules every backend shares — the conditional update that lets
exactly one submission win, idempotent replays, conflicts — on top of a few storage
primitives a backend implements (``_insert``, ``_load``, ``_compare_and_set``, …).
``MemoryApprovalStore`` keeps everything in one process; ``SqlApprovalStore`` (module
``approvals.sql_store``) keeps it in SQLite or PostgreSQL so another process can resume.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from .errors import BatchExpired, BatchNotFound, DecisionConflict, IdempotencyConflict
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
from .notify import DecisionSignals, DecisionWatch, WakeReason
from .retried import tried_again


class CallLocation(NamedTuple):
    """Where a call_id was issued: used to tell a stale id from an unknown one."""

    batch_id: str
    run_id: str
    cycle: int


class ApprovalStore(ABC):
    """Durable state of the gate. Sync methods; safe to share between threads.

    State changes of a batch go through ``resolve``, a compare-and-set on (status, version):
    of several concurrent submissions exactly one moves a pending batch on; the others get
    ``DecisionConflict`` — or, when they carry the winner's idempotency key and decision, the
    winner's record.
    """

    #: Seconds between reads of a pending batch while a run waits for it. Long where every
    #: decision notifies the waiter (a safety net), short where only polling can tell.
    wait_poll: float = 5.0

    def setup(self) -> None:  # noqa: B027 - optional hook; a store needing nothing keeps the no-op
        """Create or migrate whatever the backend needs. Safe to call any number of times."""

    # -- primitives a backend implements ------------------------------------------------
    @abstractmethod
    def _insert(self, record: BatchRecord, events: Sequence[AuditEvent]) -> None:
        """Store a new batch record and its audit events atomically."""

    @abstractmethod
    def _load(self, batch_id: str) -> BatchRecord | None: ...

    @abstractmethod
    def _compare_and_set(
        self, expected_version: int, record: BatchRecord, events: Sequence[AuditEvent]
    ) -> bool:
        """Replace the stored record iff it is pending at ``expected_version``; append the events
        in the same transaction. True when this call won."""

    @abstractmethod
    def _select(
        self, status: BatchStatus | None, run_id: str | None, limit: int | None
    ) -> list[BatchRecord]:
        """Records in creation order, filtered."""

    @abstractmethod
    def locate_call(self, call_id: str) -> CallLocation | None:
        """The batch that issued ``call_id``, or None."""

    def locate_calls(self, call_ids: Sequence[str]) -> dict[str, CallLocation]:
        """The batch that issued each of ``call_ids`` that some batch issued (a database store
        answers in one query, whatever their number)."""
        found = {call_id: self.locate_call(call_id) for call_id in call_ids}
        return {call_id: where for call_id, where in found.items() if where is not None}

    @abstractmethod
    def _claim_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent]) -> bool:
        """Insert the ledger entry iff none exists for its call_id; append the events with it."""

    @abstractmethod
    def _settle_execution(
        self, record: ExecutionRecord, from_state: str, events: Sequence[AuditEvent]
    ) -> bool:
        """Replace the ledger entry iff it is in ``from_state`` and carries ``record.claim``;
        append the events with it."""

    @abstractmethod
    def _release_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent]) -> bool:
        """Delete the ledger entry iff it is ``claimed`` and carries ``record.claim``; append
        the events with it."""

    @abstractmethod
    def execution(self, call_id: str) -> ExecutionRecord | None:
        """The ledger entry of ``call_id``, or None when it never started."""

    @abstractmethod
    def executions(
        self, *, batch_id: str | None = None, run_id: str | None = None
    ) -> list[ExecutionRecord]:
        """Ledger entries in the order they were claimed."""

    @abstractmethod
    def append_audit(self, events: Iterable[AuditEvent]) -> None:
        """Append events to the log (never updated, never deleted)."""

    @abstractmethod
    def audit_log(
        self, *, batch_id: str | None = None, run_id: str | None = None, after: int | None = None
    ) -> list[AuditEvent]:
        """Events in the order they were appended, each with its ``seq``; ``after``: only those
        with a larger ``seq`` (to follow the log, e.g. for notifications)."""

    # -- notifications -------------------------------------------------------------------
    def decision_signals(self) -> DecisionSignals:
        """Where this store announces in this process that a batch moved on (its own, here)."""
        signals = self.__dict__.get("_decision_signals")
        if signals is None:
            signals = self.__dict__.setdefault("_decision_signals", DecisionSignals())
        return signals

    def watch(self, batch_id: str) -> DecisionWatch:
        """A subscription that wakes when ``batch_id`` moves on (close it after waiting)."""
        return DecisionWatch(self.decision_signals(), batch_id)

    def on_decisions(self, wake: Callable[[WakeReason], None]) -> Callable[[], None]:
        """Call ``wake(reason)`` whenever any batch moves on; returns the unsubscribe function."""
        return self.decision_signals().subscribe(None, wake)

    def _announce(self, batch_id: str) -> None:
        self.decision_signals().publish(batch_id, "process")

    # -- the shared rules ----------------------------------------------------------------
    def create_batch(self, batch: ApprovalBatch, events: Sequence[AuditEvent] = ()) -> BatchRecord:
        record = BatchRecord(batch=batch)
        self._insert(record, events)
        return record

    def get_batch(self, batch_id: str) -> BatchRecord:
        record = self._load(batch_id)
        if record is None:
            raise BatchNotFound(batch_id)
        return record

    def list_batches(
        self,
        *,
        status: BatchStatus | None = None,
        run_id: str | None = None,
        limit: int | None = None,
    ) -> list[BatchRecord]:
        return self._select(status, run_id, limit)

    def list_summaries(
        self,
        *,
        status: BatchStatus | None = "pending",
        run_id: str | None = None,
        limit: int | None = None,
    ) -> list[BatchSummary]:
        """A light listing (no items, no SQL), oldest first: for ``approvals list``."""
        return [BatchSummary.of(r) for r in self._select(status, run_id, limit)]

    def count_batches(self, status: BatchStatus | None = "pending") -> int:
        """How many batches are in ``status`` (None: every batch)."""
        return len(self._select(status, None, None))

    def last_cycle(self, run_id: str) -> int:
        """The highest cycle number of the run's batches, 0 when it has none."""
        return max((r.batch.cycle for r in self._select(None, run_id, None)), default=0)

    def pending_batches(
        self, *, run_id: str | None = None, limit: int | None = None
    ) -> list[BatchRecord]:
        return self._select("pending", run_id, limit)

    def due_batches(self, now: datetime, *, limit: int | None = None) -> list[BatchRecord]:
        """Pending batches whose deadline is ``now`` or earlier, oldest first."""
        due = [
            r
            for r in self._select("pending", None, None)
            if r.batch.deadline and r.batch.deadline <= now
        ]
        return due if limit is None else due[:limit]

    def replay(
        self,
        record: BatchRecord,
        idempotency_key: str | None,
        decision_digest: str,
        *,
        actor: str | None,
    ) -> BatchRecord | None:
        """The record itself when this submission repeats an accepted one (same idempotency key,
        same reviewer, same decision); None when the batch is pending and this is new; otherwise
        the conflict that explains why not.

        Keys are scoped to (batch, reviewer): a key that another reviewer's accepted submission
        used is an ``IdempotencyConflict`` whatever the decision, so nobody is told that a
        decision they did not make was theirs. An unknown ``actor`` never matches.
        """
        if idempotency_key is not None:
            used = [v for v in record.votes if v.idempotency_key == idempotency_key]
            if used or record.idempotency_key == idempotency_key:
                owner: str | None
                digest: str | None
                if used:
                    owner, digest = used[0].actor, used[0].decision_digest
                else:  # a record written before votes were kept: the decider owns the key
                    owner = record.outcome.decided_by if record.outcome else None
                    digest = record.decision_digest
                if actor is None or owner != actor:
                    raise IdempotencyConflict(
                        record.batch_id, idempotency_key, reason="used by another reviewer"
                    )
                if digest == decision_digest:
                    return record
                raise IdempotencyConflict(record.batch_id, idempotency_key)
        if record.status == "pending":
            return None
        if record.status == "expired":
            raise BatchExpired(record.batch_id, "the batch expired before a decision arrived")
        raise DecisionConflict(
            record.batch_id, f"the batch is already {record.status} (version {record.version})"
        )

    def resolve(
        self,
        batch_id: str,
        *,
        expected_version: int,
        outcome: ApprovalOutcome | None,
        events: Sequence[AuditEvent] = (),
        idempotency_key: str | None = None,
        decision_digest: str | None = None,
        status: BatchStatus = "resolved",
        votes: Sequence[Vote] | None = None,
        actor: str | None = None,
        batch: ApprovalBatch | None = None,
    ) -> BatchRecord:
        """Move a pending batch on from ``expected_version`` — to ``status`` with ``outcome``,
        or, for a vote that does not complete a quorum, to a new pending version with ``votes``.
        ``batch``: the batch re-opened by an edit (same id and call_ids, the edited SQL in
        place, its new quorum), stored in the same conditional update.

        ``actor`` (default: the last vote's, else the outcome's decider) is who submits: a
        submission that loses the race replays the winner's record only when it carries the
        winner's idempotency key, reviewer and decision."""
        if actor is None:
            actor = votes[-1].actor if votes else (outcome.decided_by if outcome else None)
        current = self.get_batch(batch_id)
        updated = current.model_copy(
            update={
                "status": status,
                "version": expected_version + 1,
                "outcome": outcome,
                "idempotency_key": idempotency_key,
                "decision_digest": decision_digest,
                "votes": list(votes) if votes is not None else current.votes,
                **({"batch": batch} if batch is not None else {}),
            }
        )
        if batch is not None and (
            batch.batch_id != batch_id
            or [i.call_id for i in batch.items] != [i.call_id for i in current.batch.items]
        ):
            raise ValueError("a re-opened batch keeps its id and its call_ids")
        if self._compare_and_set(expected_version, updated, events):
            self._announce(batch_id)
            return updated
        winner = self.get_batch(batch_id)
        if tried_again() and winner == updated:  # this change, applied before its answer was lost
            return winner
        replayed = self.replay(winner, idempotency_key, decision_digest or "", actor=actor)
        if replayed is not None:
            return replayed
        raise DecisionConflict(batch_id, f"the batch changed since version {expected_version}")

    # -- the execution ledger ------------------------------------------------------------
    def claim_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent] = ()) -> bool:
        """Record that ``record.call_id`` is claimed now; False when the ledger already has it.

        Tried again after a lost connection (``tried_again``), a claim that finds an entry with
        its own token (``record.claim``) knows its earlier try committed: True."""
        if self._claim_execution(record, events):
            return True
        if not (tried_again() and record.claim):
            return False
        existing = self.execution(record.call_id)
        return existing is not None and existing.claim == record.claim

    def settle_execution(
        self,
        record: ExecutionRecord,
        *,
        from_state: str = "claimed",
        events: Sequence[AuditEvent] = (),
    ) -> bool:
        """Move the ledger entry of ``record.claim`` from ``from_state`` to ``record``; False
        when it is not there (another state, or another claim's). Idempotent: tried again after
        a lost connection, finding exactly ``record`` (its own earlier try) is True."""
        if self._settle_execution(record, from_state, events):
            return True
        return tried_again() and self.execution(record.call_id) == record

    def release_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent] = ()) -> bool:
        """Remove the claim ``record.claim`` of a statement that was never sent, so it can be
        claimed again; False when the entry is not that claim or has moved on (``sent``).
        Tried again after a lost connection, finding no entry means its earlier try did it."""
        if self._release_execution(record, events):
            return True
        return tried_again() and self.execution(record.call_id) is None


class MemoryApprovalStore(ApprovalStore):
    """Everything in this process's memory; for tests and single-process runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, BatchRecord] = {}
        self._calls: dict[str, CallLocation] = {}
        self._events: list[AuditEvent] = []
        self._executions: dict[str, ExecutionRecord] = {}

    def _append_locked(self, events: Iterable[AuditEvent]) -> None:
        for event in events:
            self._events.append(event.model_copy(update={"seq": len(self._events) + 1}))

    def _insert(self, record: BatchRecord, events: Sequence[AuditEvent]) -> None:
        batch = record.batch
        with self._lock:
            if batch.batch_id in self._records:
                raise ValueError(f"batch {batch.batch_id} already exists")
            clash = [i.call_id for i in batch.items if i.call_id in self._calls]
            if clash:
                raise ValueError(f"call_id already issued: {clash[0]}")
            self._records[batch.batch_id] = record
            for item in batch.items:
                self._calls[item.call_id] = CallLocation(batch.batch_id, batch.run_id, batch.cycle)
            self._append_locked(events)

    def _load(self, batch_id: str) -> BatchRecord | None:
        with self._lock:
            return self._records.get(batch_id)

    def _compare_and_set(
        self, expected_version: int, record: BatchRecord, events: Sequence[AuditEvent]
    ) -> bool:
        with self._lock:
            current = self._records.get(record.batch_id)
            if (
                current is None
                or current.status != "pending"
                or current.version != expected_version
            ):
                return False
            self._records[record.batch_id] = record
            self._append_locked(events)
            return True

    def _select(
        self, status: BatchStatus | None, run_id: str | None, limit: int | None
    ) -> list[BatchRecord]:
        with self._lock:
            found = [
                r
                for r in self._records.values()
                if (status is None or r.status == status)
                and (run_id is None or r.batch.run_id == run_id)
            ]
        return found if limit is None else found[:limit]

    def locate_call(self, call_id: str) -> CallLocation | None:
        with self._lock:
            return self._calls.get(call_id)

    def _claim_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent]) -> bool:
        with self._lock:
            if record.call_id in self._executions:
                return False
            self._executions[record.call_id] = record
            self._append_locked(events)
            return True

    def _settle_execution(
        self, record: ExecutionRecord, from_state: str, events: Sequence[AuditEvent]
    ) -> bool:
        with self._lock:
            current = self._executions.get(record.call_id)
            if current is None or (current.state, current.claim) != (from_state, record.claim):
                return False
            self._executions[record.call_id] = record
            self._append_locked(events)
            return True

    def _release_execution(self, record: ExecutionRecord, events: Sequence[AuditEvent]) -> bool:
        with self._lock:
            current = self._executions.get(record.call_id)
            if current is None or (current.state, current.claim) != ("claimed", record.claim):
                return False
            del self._executions[record.call_id]
            self._append_locked(events)
            return True

    def execution(self, call_id: str) -> ExecutionRecord | None:
        with self._lock:
            return self._executions.get(call_id)

    def executions(
        self, *, batch_id: str | None = None, run_id: str | None = None
    ) -> list[ExecutionRecord]:
        with self._lock:
            return [
                e
                for e in self._executions.values()
                if (batch_id is None or e.batch_id == batch_id)
                and (run_id is None or e.run_id == run_id)
            ]

    def append_audit(self, events: Iterable[AuditEvent]) -> None:
        with self._lock:
            self._append_locked(events)

    def audit_log(
        self, *, batch_id: str | None = None, run_id: str | None = None, after: int | None = None
    ) -> list[AuditEvent]:
        with self._lock:
            return [
                e
                for e in self._events
                if (batch_id is None or e.batch_id == batch_id)
                and (run_id is None or e.run_id == run_id)
                and (after is None or (e.seq or 0) > after)
            ]
