"""The execution ledger: each approved call_id runs at most once, even across crashes.

Before a statement runs its call_id is claimed in the store (an insert that only one process
can make); after it ran the claim is settled ``done`` or ``failed``. A claim never settled —
the worker died between the two — is found by ``recover()`` on resume and marked
``in_doubt``: reported, never re-run silently.

Example:
    with ledger.executing(outcome, call_id) as sql:
        result = executor.run(validator.validate(sql).statement)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from .errors import AlreadyExecuted, ExecutionInDoubt
from .models import ApprovalOutcome, AuditEvent, ExecutionRecord
from .store import ApprovalStore

EXECUTOR_ACTOR = "sqlgate-executor"


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
    def executing(self, outcome: ApprovalOutcome, call_id: str) -> Iterator[str]:
        """Claim ``call_id``, yield its exact approved SQL, settle the claim on exit.

        Raises ``NotRunnable`` (not approved / hash mismatch), ``AlreadyExecuted`` (the ledger
        has it) or ``ExecutionInDoubt`` before anything runs.
        """
        sql = outcome.runnable(call_id)
        now = self.clock()
        claim = ExecutionRecord(
            call_id=call_id,
            batch_id=outcome.batch_id,
            run_id=outcome.run_id,
            sql_hash=outcome.resolutions[call_id].sql_hash or "",
            state="started",
            actor=self.actor,
            started_at=now,
        )
        if not self.store.claim_execution(claim, [self._event(claim, "execution_started", now)]):
            existing = self.store.execution(call_id)
            if existing is not None and existing.state == "in_doubt":
                raise ExecutionInDoubt(
                    call_id, "started before but its end was never recorded; not re-run"
                )
            state = existing.state if existing else "claimed"
            raise AlreadyExecuted(
                call_id,
                f"already {state} (by {existing.actor if existing else '?'}); not run again",
            )
        try:
            yield sql
        except GeneratorExit:
            raise  # abandoned without an outcome: left started, so recover() marks it in doubt
        except BaseException as exc:
            self._settle(claim, "failed", f"{type(exc).__name__}: {exc}")
            raise
        self._settle(claim, "done", None)

    def _settle(self, claim: ExecutionRecord, state: str, detail: str | None) -> None:
        now = self.clock()
        settled = claim.model_copy(update={"state": state, "finished_at": now, "detail": detail})
        self.store.settle_execution(
            settled, events=[self._event(settled, f"execution_{state}", now, detail=detail)]
        )

    def remaining(self, outcome: ApprovalOutcome) -> list[str]:
        """Runnable call_ids of ``outcome`` the ledger has never seen, in batch order."""
        return [cid for cid in outcome.runnable_ids if self.store.execution(cid) is None]

    def recover(
        self, *, run_id: str | None = None, batch_id: str | None = None
    ) -> list[ExecutionRecord]:
        """Mark every unsettled claim ``in_doubt``; call it on resume, when its worker is gone."""
        marked = []
        for record in self.store.executions(run_id=run_id, batch_id=batch_id):
            if record.state != "started":
                continue
            now = self.clock()
            doubt = record.model_copy(
                update={"state": "in_doubt", "finished_at": now, "detail": "worker ended mid-run"}
            )
            if self.store.settle_execution(
                doubt, events=[self._event(doubt, "execution_in_doubt", now)]
            ):
                marked.append(doubt)
        return marked
