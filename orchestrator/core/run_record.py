"""A run's record in the run store: every transition of its status, checkpoint and lease.

``RunRecord`` writes what the pipeline's lifecycle decides: a run recorded (``begin``, or
``queue`` for one nobody advances yet), its results checkpointed before the answers are written
(``executed``), paused at the gate (``paused``), finished (``finished``), or found taken over by
another process (``after_lost_lease``). Each write is a conditional update on the run's
(status, version), so exactly one process wins each step. It also checks that a stored run
belongs here (``check_database``) and whether the schema changed under it (``check_schema``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from approvals import ApprovalStore
from approvals.expiry import supersede
from orchestrator.core.checkpoint import (
    ExecutedCheckpoint,
    FinishedCheckpoint,
    PausedCheckpoint,
    StartedCheckpoint,
    recorded_hints,
)
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import (
    ConfigurationError,
    DatabaseError,
    RunConflict,
    RunNotFound,
    WrongDatabase,
)
from orchestrator.core.identity import Identity, IdentityValue
from orchestrator.core.lease import LeaseLost
from orchestrator.core.question import PausedAtGate
from orchestrator.core.result import RunError, RunResult, RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.run_identity import check_run_database, check_run_login
from orchestrator.core.runs import RunStore, StoredRun
from safety import Policy

__all__ = ["RunRecord"]


class RunRecord:
    """The run store's side of a pipeline's runs, for one database and one lease owner."""

    def __init__(
        self, run_store: RunStore, db: TargetDatabase, *, owner: str, lease_s: float
    ) -> None:
        self.store = run_store
        self.db = db
        self.owner = owner
        self.lease_s = lease_s

    # -- a run recorded -----------------------------------------------------------------------

    def begin(
        self,
        run_id: str,
        questions: list[str],
        policy: dict[str, object] | None,
        follow_up_of: str | None = None,
        identity: Identity | None = None,
        hints: Sequence[str] | None = None,
    ) -> tuple[tuple[str, int], StartedCheckpoint | None]:
        """Record the run as running under this process's lease (claiming it if queued); the
        checkpoint a queued run was recorded with (its policy, attributes and hints) comes back
        with its (status, version)."""
        try:
            stored = self.store.load(run_id)
        except RunNotFound:
            self.store.create(
                run_id,
                self.db.safe_url,
                StartedCheckpoint(
                    run_id=run_id,
                    questions=questions,
                    policy=policy,
                    identity=dict(identity) if identity else None,
                    hints=recorded_hints(hints, len(questions)),
                ),
                status="running",
                owner=self.owner,
                lease_s=self.lease_s,
                follow_up_of=follow_up_of,
                schema_fingerprint=self.schema_fingerprint(),
                login=self.db.login_for(Policy.from_data(policy) if policy else None),
            )
            return ("running", 1), None
        if stored.status != "queued":
            raise RunConflict(f"run {run_id} already exists ({stored.status})")
        self.check_database(stored)
        version = self.store.transition(
            run_id,
            expected=("queued", stored.version),
            status="running",
            owner=self.owner,
            lease_s=self.lease_s,
        )
        queued = stored.checkpoint
        return ("running", version), (queued if isinstance(queued, StartedCheckpoint) else None)

    def queue(
        self,
        run_id: str,
        questions: Sequence[str],
        policy: Policy,
        *,
        follow_up_of: str | None,
        statements: Sequence[str] | None,
        identity: dict[str, IdentityValue] | None,
        hints: Sequence[str] | None = None,
    ) -> None:
        """Record a run nobody advances yet, under ``policy`` and the asker's ``identity``, with
        the asker's ``hints`` (one per question)."""
        self.store.create(
            run_id,
            self.db.safe_url,
            StartedCheckpoint(
                run_id=run_id,
                questions=list(questions),
                statements=list(statements) if statements is not None else None,
                policy=policy.model_dump(mode="json"),
                identity=identity,
                hints=recorded_hints(hints, len(questions)),
            ),
            status="queued",
            follow_up_of=follow_up_of,
            schema_fingerprint=self.schema_fingerprint(),
            login=self.db.login_for(policy),
        )

    # -- checks ---------------------------------------------------------------------------------

    def check_database(self, stored: StoredRun) -> None:
        """``WrongDatabase`` unless the run was recorded for this database, to execute as the
        login this process would execute it with (under the run's policy)."""
        check_run_database(stored.run_id, stored.target, self.db.identity)
        if isinstance(stored.checkpoint, FinishedCheckpoint):
            return  # nothing will execute: its stored results are read back as they are
        recorded = getattr(stored.checkpoint, "policy", None)
        policy = Policy.from_data(recorded) if recorded is not None else self.db.policy
        try:
            own = self.db.login_for(policy)
        except ConfigurationError as exc:
            raise WrongDatabase(
                f"run {stored.run_id} executes as {stored.login or 'an unrecorded login'}, "
                f"which this process cannot take ({exc.message}): nothing was run"
            ) from None
        check_run_login(stored.run_id, stored.login, own)

    def schema_fingerprint(self) -> str | None:
        """The fingerprint of the schema this process validates against; None when it cannot be
        read now (the run then fails as before, and a resume validates again: unknown is
        treated as changed)."""
        try:
            return self.db.schema_fingerprint()
        except DatabaseError:
            return None

    def check_schema(self, ctx: RunContext, stored: StoredRun) -> None:
        """Read the schema again; when it is not the one the statements were approved on (or
        that is unknown), they are validated again before they run."""
        try:
            now: str | None = self.db.schema_fingerprint(refresh=True)
        except DatabaseError:  # unreadable now: the run's stages report it as a database error
            now = None
        ctx.schema_changed = now is None or stored.schema_fingerprint != now

    # -- the run's steps ------------------------------------------------------------------------

    def supersede(
        self, approval_store: ApprovalStore, run_id: str, *, keep: str | None, reason: str
    ) -> None:
        """Close the run's pending batches other than ``keep``: nobody will resume them."""
        now = datetime.now(UTC)
        for record in approval_store.pending_batches(run_id=run_id):
            if record.batch_id != keep:
                supersede(approval_store, record, now, reason=reason, actor=self.owner)

    def executed(self, ctx: RunContext) -> None:
        """Checkpoint the results before the answers are written: a takeover then only writes
        the answers, and runs nothing again."""
        if ctx.stored is None:
            return
        if ctx.lease is not None:
            ctx.lease.check()
        status, _ = ctx.stored
        checkpoint = ExecutedCheckpoint(
            run_id=ctx.run_id,
            dialect=self.db.dialect,
            calls_made=ctx.calls_made,
            questions=[q.to_checkpoint() for q in ctx.questions],
            policy=ctx.policy,
            identity=ctx.identity,
        )
        version = self.store.transition(
            ctx.run_id,
            expected=ctx.stored,
            status=status,
            checkpoint=checkpoint,
            owner=self.owner,
            lease_s=self.lease_s,
        )
        ctx.stored = (status, version)

    def paused(self, ctx: RunContext, pause: PausedAtGate) -> None:
        """Checkpoint the run at the gate; its questions wait with ``awaiting_approval``."""
        waiting = {s.q.qid for s in pause.pending.values()}
        for q in ctx.questions:
            if q.active and (
                q.qid in waiting or q.after_synthesis is not None or q.correction_error
            ):
                q.status = RunStatus.AWAITING_APPROVAL
                q.error = q.error or RunError(
                    code="awaiting_approval",
                    message=f"waiting for a decision on approval batch {pause.batch_id}; "
                    f"then: sqlgate resume {ctx.run_id}",
                )
        checkpoint = PausedCheckpoint.model_validate(
            {
                "run_id": ctx.run_id,
                "dialect": self.db.dialect,
                "calls_made": ctx.calls_made,
                "cycle": pause.cycle,
                "batch_id": pause.batch_id,
                "pending": {
                    call_id: {
                        "question_id": s.q.qid,
                        "ok": s.ok,
                        "code": s.code,
                        "message": s.message,
                    }
                    for call_id, s in pause.pending.items()
                },
                "questions": [q.to_checkpoint() for q in ctx.questions],
                "policy": ctx.policy,
                "identity": ctx.identity,
            }
        )
        assert ctx.stored is not None
        self.store.transition(
            ctx.run_id,
            expected=ctx.stored,
            status="awaiting_approval",
            checkpoint=checkpoint,
            schema_fingerprint=self.schema_fingerprint(),
        )

    def finished(self, ctx: RunContext, results: list[RunResult]) -> None:
        """The run's results, recorded as its end."""
        if ctx.stored is not None:
            self.store.transition(
                ctx.run_id,
                expected=ctx.stored,
                status="finished",
                checkpoint=FinishedCheckpoint(results=results),
            )

    def after_lost_lease(self, ctx: RunContext, lost: RunConflict) -> list[RunResult]:
        """The run's true outcome once this process lost it: the results the process that took
        it over recorded, or ``LeaseLost`` saying where the run stands now (never this
        process's half-done questions as if they had ended)."""
        stored = self.store.load(ctx.run_id)
        if isinstance(stored.checkpoint, FinishedCheckpoint):
            return list(stored.checkpoint.results)
        raise LeaseLost(
            f"{lost.message}; it is now {stored.status.replace('_', ' ')}"
            f"{f' (held by {stored.owner})' if stored.owner else ''}: "
            f"see `sqlgate runs show {ctx.run_id}`"
        )
