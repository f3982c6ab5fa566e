"""The execution ledger: each approved call_id runs at most once, even across crashes.

Before a statement runs its call_id is claimed in the store (an insert that only one process
can make, carrying the claim's own token); right before it goes to the database the claim is
marked ``sent`` (durably, a conditional update on that token); after it ran the claim is settled
``done`` or ``failed``. ``recover()``, called on resume or takeover when the claim's process is
gone, tells the two crashes apart: a claim never ``sent`` provably never reached the database and
is released, so the statement runs (once) later; a ``sent`` claim never settled is marked
``in_doubt``: reported, never re-run silently. A process whose claim was released meanwhile
cannot mark it ``sent`` (the token no longer matches) and so never sends it.

Example:
    with ledger.executing(outcome, call_id) as claim:
        statement = validator.validate(claim.sql).statement
        claim.sent()
        result = executor.run(statement)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from .errors import AlreadyExecuted, ExecutionInDoubt
from .models import ApprovalOutcome, AuditEvent, ExecutionRecord
from .store import ApprovalStore

EXECUTOR_ACTOR = "sqlgate-executor"
#: Claims recorded before the ledger recorded sending: they may have been sent.
_MAYBE_SENT = ("sent", "started")


class Claim:
    """A statement claimed for this process: its approved ``sql``; ``sent()`` before it goes to
    the database."""

    def __init__(self, ledger: ExecutionLedger, record: ExecutionRecord, sql: str) -> None:
        self._ledger = ledger
        self.record = record
        self.sql = sql
        self.lost = False  # released by a recovery before it was sent: not this process's

    @property
    def is_sent(self) -> bool:
        return self.record.state == "sent"

    def sent(self) -> None:
        """Record, durably, that the statement goes to the database now: from here on a crash
        leaves it in doubt. Raises ``AlreadyExecuted`` (and nothing may be sent) when the claim
        is no longer this process's: another one recovered the run and released it."""
        if self.is_sent:
            return
        ledger = self._ledger
        now = ledger.clock()
        sent = self.record.model_copy(update={"state": "sent", "sent_at": now})
        if not ledger.store.settle_execution(
            sent, from_state="claimed", events=[ledger._event(sent, "execution_sent", now)]
        ):
            self.lost = True
            raise AlreadyExecuted(
                self.record.call_id,
                "its claim was released by the process that took the run over; not sent here",
            )
        self.record = sent


class ExecutionLedger:
    """Claims and settlements of approved statements, kept in an ``ApprovalStore``."""

    def __init__(
        self,
        store: ApprovalStore,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        actor: str = EXECUTOR_ACTOR,
    ) -> None:
        self.store = store
        self.clock = clock
        self.actor = actor

    def _event(self, record: ExecutionRecord, event: str, at: datetime, **detail) -> AuditEvent:
        return AuditEvent(
            at=at,
            run_id=record.run_id,
            batch_id=record.batch_id,
            call_id=record.call_id,
            event=event,
            actor=self.actor,
            detail={"sql_hash": record.sql_hash, **detail},
        )

    @contextmanager
    def executing(self, outcome: ApprovalOutcome, call_id: str) -> Iterator[Claim]:
        """Claim ``call_id``, yield the ``Claim`` (its exact approved SQL), settle it on exit.

        The body calls ``claim.sent()`` right before the statement goes to the database; a body
        that ends without doing so is taken to have sent it. Raises ``NotRunnable`` (not
        approved / hash mismatch), ``AlreadyExecuted`` (the ledger has it) or
        ``ExecutionInDoubt`` before anything runs.
        """
        sql = outcome.runnable(call_id)
        now = self.clock()
        record = ExecutionRecord(
            call_id=call_id,
            batch_id=outcome.batch_id,
            run_id=outcome.run_id,
            sql_hash=outcome.resolutions[call_id].sql_hash or "",
            state="claimed",
            actor=self.actor,
            started_at=now,
            claim=uuid.uuid4().hex,
        )
        if not self.store.claim_execution(record, [self._event(record, "execution_claimed", now)]):
            existing = self.store.execution(call_id)
            if existing is not None and existing.state == "in_doubt":
                raise ExecutionInDoubt(
                    call_id, "sent before but its end was never recorded; not re-run"
                )
            state = existing.state if existing else "claimed"
            raise AlreadyExecuted(
                call_id,
                f"already {state} (by {existing.actor if existing else '?'}); not run again",
            )
        claim = Claim(self, record, sql)
        try:
            yield claim
        except GeneratorExit:
            raise  # abandoned without an outcome: recover() releases it or marks it in doubt
        except BaseException as exc:
            if not claim.lost:
                self._settle(claim.record, "failed", f"{type(exc).__name__}: {exc}")
            raise
        claim.sent()
        self._settle(claim.record, "done", None)

    def _settle(self, claim: ExecutionRecord, state: str, detail: str | None) -> None:
        now = self.clock()
        settled = claim.model_copy(update={"state": state, "finished_at": now, "detail": detail})
        self.store.settle_execution(
            settled,
            from_state=claim.state,
            events=[self._event(settled, f"execution_{state}", now, detail=detail)],
        )

    def remaining(self, outcome: ApprovalOutcome) -> list[str]:
        """Runnable call_ids of ``outcome`` the ledger has never seen, in batch order."""
        return [cid for cid in outcome.runnable_ids if self.store.execution(cid) is None]

    def recover(
        self, *, run_id: str | None = None, batch_id: str | None = None
    ) -> list[ExecutionRecord]:
        """Settle the claims of a process that is gone; call it on resume or takeover.

        A claim never ``sent`` is released (its statement provably never reached the database,
        and runs later, once); one ``sent`` and never settled is marked ``in_doubt``. Returns
        the claims marked in doubt."""
        marked = []
        for record in self.store.executions(run_id=run_id, batch_id=batch_id):
            now = self.clock()
            if record.state == "claimed":
                self.store.release_execution(
                    record,
                    events=[self._event(record, "execution_released", now, detail="never sent")],
                )
                continue
            if record.state not in _MAYBE_SENT:
                continue
            doubt = record.model_copy(
                update={"state": "in_doubt", "finished_at": now, "detail": "worker ended mid-run"}
            )
            if self.store.settle_execution(
                doubt,
                from_state=record.state,
                events=[self._event(doubt, "execution_in_doubt", now)],
            ):
                marked.append(doubt)
        return marked
