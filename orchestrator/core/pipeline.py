"""The pipeline, for one question or many, step by step as the design's table gives it.

    Batch 1 (reasoning) -> SchemaExplorer -> DataExplorer? -> [META: Batch 4]
    -> Batch 2 (SQL) -> SafetyValidator -> ONE approval cycle -> SQLExecutor (parallel)
    -> [errors: Batch 3, re-validate, ONE re-approval cycle; at most twice] -> ResultValidator
    -> Batch 4

A single question is a batch of one, so its call budget is the seed's: simple data question 3,
meta question 2, one correction 4, two corrections 5, unresolved ambiguity 1. With N questions
each batch packs up to ``k`` questions per call (fewer when the prompt would grow past
``max_prompt_chars``), so the calls grow as about 3·⌈N/k⌉.

The stages are plain functions in ``orchestrator.core.stages``; a run's state is a ``RunContext``
passed through them, so one ``Pipeline`` (and its one LLM client) serves many runs at once.

This module is over 400 lines on purpose: it is the run's whole lifecycle (start, pause at the
gate, resume, take over a stopped run, finish), and every transition of the run's record and
lease is here, so the guarantees (one winner per run, nothing executed twice) read in one place.
What a run may read is the database's policy: ``TargetDatabase`` is the one factory of the
validator, the executor and the approval batch's context.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from agents import SchemaInspectionError, SQLExecutor
from agents.catalogue import LARGE_SCHEMA_TABLES
from approvals import ApprovalCancelled, ApprovalGate, ApprovalOutcome, ApprovalStore, Reviewer
from approvals.expiry import supersede
from orchestrator.core import stages, telemetry
from orchestrator.core.batching import Progress
from orchestrator.core.checkpoint import (
    ExecutedCheckpoint,
    FinishedCheckpoint,
    PausedCheckpoint,
    StartedCheckpoint,
)
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import (
    ConfigurationError,
    DatabaseError,
    LLMError,
    RunConflict,
    RunNotFound,
    WrongDatabase,
)
from orchestrator.core.identity import Identity, IdentityValue, checked_identity, needed_identity
from orchestrator.core.lease import Lease, LeaseLost, process_owner
from orchestrator.core.llm import LLMClient
from orchestrator.core.pipeline_config import PipelineConfig
from orchestrator.core.question import PausedAtGate, PendingStatement, QuestionState
from orchestrator.core.result import RunError, RunResult, RunStatus
from orchestrator.core.result_rows import ResultRowStore
from orchestrator.core.run_context import ResultSink, RunContext, no_progress
from orchestrator.core.run_identity import check_run_database, check_run_login
from orchestrator.core.runs import RunStore, StoredRun
from orchestrator.core.stages.approval import CORRECTABLE_REFUSALS, resume_cycle
from orchestrator.core.state_patience import guard_beside
from orchestrator.features.memory import ReviewMemory, gate_policy
from orchestrator.features.risk import risk_approval
from ratelimit import RateLimitError
from safety import Policy, SqlValidator
from safety.row_filters import attributes_named

#: Where a run carries on from: the start (None), a decided gate (cycle, pending statements,
#: outcome), or results whose answers are still to be written ("executed").
Resumed = tuple[int, dict[str, PendingStatement], ApprovalOutcome] | Literal["executed"] | None


class Pipeline:
    """Answers questions about one database, with every SQL statement approved before it runs.

    ``result_rows`` keeps every row a statement kept (the result object carries a preview);
    by default it is in the run store's database when there is one.

    ``reviewer`` is an approvals strategy (``TerminalReviewer``, ``ApproveAll``, ...) asked ONCE
    per approval cycle for every statement waiting. With ``reviewer=None`` the run pauses at the
    gate instead: it is checkpointed in ``run_store``, its statements wait in ``approval_store``
    for a decision from anywhere (``sqlgate approvals decide``), and ``resume(run_id)`` finishes
    it in any process. ``progress(stage, done, total)`` follows the stages (spinner, bars); a
    caller may pass its own per run.

    The pipeline keeps no per-run state: many threads may call ``run_batch``/``resume`` on one
    pipeline at once, each run with its own ``RunContext``.
    """

    def __init__(
        self,
        database: TargetDatabase,
        llm: LLMClient,
        reviewer: Reviewer | None,
        *,
        config: PipelineConfig | None = None,
        approval_store: ApprovalStore | None = None,
        run_store: RunStore | None = None,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.perf_counter,
        owner: str | None = None,
        memory: ReviewMemory | None = None,
        result_rows: ResultRowStore | None = None,
        actor: str = "reviewer",
        asker: Callable[[str], str | Sequence[str] | None] | None = None,
    ) -> None:
        if reviewer is None and (approval_store is None or run_store is None):
            raise ValueError(
                "a pipeline without a reviewer pauses at the gate: give it approval_store and run_store"
            )
        telemetry.enabled()  # traces asked for but not installed: refused before any run starts
        self.db = database
        self.llm = llm
        self.reviewer = reviewer
        self.config = config or PipelineConfig()
        self.approval_store = approval_store
        self.run_store = run_store
        if approval_store is not None:
            approval_store.setup()  # idempotent: creates or migrates the tables
        if run_store is not None:
            run_store.setup()
        self.progress: Progress = progress or no_progress
        self.clock = clock
        self.owner = owner or process_owner()  # whose lease this pipeline's runs hold
        self.memory = memory  # reviewed-SQL memory: examples, notes, earned auto-approval
        self.actor = actor  # whose decisions ``reviewer`` records (a proven name at the CLI)
        # run id -> who asked for it (the token's actor, the login at a terminal): the author of
        # its SQL, which its batches record (never evidence for trust; no decider under four_eyes)
        self.asker = asker
        # Full results (the result object holds a preview): beside the runs when they are stored.
        # On the run store's patience: a worker loses no run to a state database that blinks.
        self.result_rows = result_rows or (
            guard_beside(ResultRowStore(run_store.engine), run_store)
            if run_store is not None
            else None
        )

    def _authors(self, run_id: str) -> list[str]:
        """Who authored the run's SQL: ``asker``'s name, or names (one transport may prove
        more than one, e.g. stdio MCP's chosen actor and the login the agent runs as)."""
        found = self.asker(run_id) if self.asker else None
        names = [found] if isinstance(found, str) else list(found or ())
        return [name for name in names if name]

    # -- shared services -----------------------------------------------------------------------

    def validator(
        self, policy: Policy | None = None, identity: Identity | None = None
    ) -> SqlValidator:
        """The validator of ``policy`` (default: the database's base policy), its row filters
        bound to the asker's attributes ``identity``."""
        return self.db.validator(policy, identity)

    def executor(self, policy: Policy | None = None) -> SQLExecutor:
        return self.db.executor(policy)

    def run_policy(self, ctx: RunContext) -> Policy:
        """The policy a run is judged under: recorded when it started (a role's narrower one
        for a role's questions), so a resumed or taken-over run keeps it."""
        return Policy.from_data(ctx.policy) if ctx.policy is not None else self.db.policy

    def gate(
        self,
        run_id: str,
        validator: SqlValidator | None = None,
        policy: Policy | None = None,
        *,
        database: str | None = None,
        identity: Identity | None = None,
    ) -> ApprovalGate:
        """The approval gate of a run, under ``policy`` (the run's); ``database`` is the run's
        recorded database, which earned auto-approval looks its evidence up under; ``identity``
        the asker's attributes, which the batch records so that edits are validated with them."""
        return ApprovalGate(
            reviewer=self.reviewer,
            validate=(validator or self.validator(policy, identity)).validate,
            policy=gate_policy(self, policy, key=database),
            store=self.approval_store,
            run_id=run_id,
            actor=self.actor,
            # dialect and policy: a reviewer in another process validates edits alike
            context=self.db.gate_context(policy, identity),
            quorum=self.config.approval_quorum,
            assess=self.db.risk_assessor(policy),
            risk_approval=risk_approval(policy or self.db.policy),
            authors=self._authors(run_id),
            four_eyes=(policy or self.db.policy).approvals.four_eyes,
            ttl=timedelta(seconds=self.config.approval_ttl_s)
            if self.config.approval_ttl_s
            else None,
            on_expiry=self.config.on_expiry,
        )

    # -- public API --------------------------------------------------------------------------------

    def ask(
        self, question: str, *, role: str | None = None, identity: Identity | None = None
    ) -> RunResult:
        """Answer one question (a batch of one)."""
        return self.run_batch([question], role=role, identity=identity)[0]

    def run_batch(
        self,
        questions: Sequence[str],
        *,
        on_result: ResultSink | None = None,
        run_id: str | None = None,
        progress: Progress | None = None,
        role: str | None = None,
        follow_up_of: str | None = None,
        statements: Sequence[str] | None = None,
        identity: Identity | None = None,
    ) -> list[RunResult]:
        """Answer many questions with batched LLM calls and ONE approval cycle per round.

        ``on_result(index, result)`` is called as soon as each question is finished (early for
        questions that stop early), so results can be streamed out before the batch ends. A
        streamed question's state is then let go, and ``run_batch`` returns an empty list.
        ``run_id`` names the run (a service answers with it before the run starts; a run it
        recorded as ``queued`` is claimed here). ``follow_up_of`` links a follow-up (the answers
        to a run's clarifying questions, ``orchestrator.features.clarify``) to that run.

        A pipeline that pauses at the gate (no reviewer) records the run from its start and
        holds its lease while it advances, so another process can take it over if this one
        stops (``recover``). ``role`` narrows the database's policy to that role's section; a
        run queued with a role keeps the policy it was queued under.

        ``statements``: the caller's own SQL, one per question (each question is then the
        statement's purpose). They go through the same validator and the same ONE review, and
        no model call is made: no plan, no correction, the answer is the result itself.

        ``identity``: the asker's attributes (from a proven identity only), which the policy's
        row filters are bound to; the run records them, so every process that advances it
        validates with them (a run queued with attributes keeps those it was queued with).
        """
        run_id = run_id or "run_" + uuid.uuid4().hex[:16]
        ctx = self._context(run_id, list(questions), progress, on_result)
        self._submitted(ctx, statements)
        ctx.policy = self.db.policy_for(role).model_dump(mode="json")
        ctx.identity = self._needed(identity, ctx.policy)
        ctx.follow_up_of = follow_up_of
        ctx.database = self.db.safe_url
        if self._durable:
            ctx.stored, queued = self._begin(
                run_id, list(questions), ctx.policy, follow_up_of, ctx.identity
            )
            if queued is not None:  # queued: what it was recorded with
                ctx.policy = queued.policy or ctx.policy
                ctx.identity = self._needed(queued.identity, ctx.policy)
        for q in ctx.questions:
            stages.check_input(self, q)
        stages.admit(self, ctx)
        ctx.emit()
        results = self._held(ctx, resumed=None)
        return [] if on_result is not None else results

    def queue(
        self,
        run_id: str,
        questions: Sequence[str],
        *,
        role: str | None = None,
        follow_up_of: str | None = None,
        statements: Sequence[str] | None = None,
        identity: Identity | None = None,
    ) -> None:
        """Record a run nobody advances yet (a service accepted it); ``run_batch`` claims it, and
        ``recover`` starts it if the service stops first. The run keeps the policy of ``role``
        (checked now: an unknown role is refused before anything is recorded) and the asker's
        attributes ``identity``."""
        assert self.run_store is not None
        chosen = self.db.policy_for(role)
        policy = chosen.model_dump(mode="json")
        self.run_store.create(
            run_id,
            self.db.safe_url,
            StartedCheckpoint(
                run_id=run_id,
                questions=list(questions),
                statements=list(statements) if statements is not None else None,
                policy=policy,
                identity=self._needed(identity, policy),
            ),
            status="queued",
            follow_up_of=follow_up_of,
            schema_fingerprint=self._schema_fingerprint(),
            login=self.db.login_for(chosen),
        )

    def resume(self, run_id: str, *, progress: Progress | None = None) -> list[RunResult]:
        """Carry on with a run paused at the gate, once its batch is decided.

        Still undecided: the results say ``awaiting_approval`` and nothing changes. Decided:
        exactly one process wins the run (a conditional update), runs what was approved at most
        once (the approvals ledger), and finishes or pauses at the next cycle. A finished run
        returns its stored results; a statement whose execution was cut short is reported in
        doubt, never run again silently. A run whose process stopped (its lease expired) is
        taken over (``recover``).

        Raises ``WrongDatabase`` (and changes nothing) for a run of another database. When the
        schema changed since the statements were approved, each approved statement is validated
        again against the schema as it is now, and one that no longer passes is not run.
        """
        if self.run_store is None or self.approval_store is None:
            raise ValueError("resume needs the run_store and approval_store the run was paused in")
        stored = self.run_store.load(run_id)
        self._check_database(stored)
        checkpoint = stored.checkpoint
        if isinstance(checkpoint, FinishedCheckpoint):
            return list(checkpoint.results)
        if stored.lease_expired():
            return self.recover(run_id, progress=progress)
        if stored.status != "awaiting_approval" or not isinstance(checkpoint, PausedCheckpoint):
            until = (
                f" until {stored.lease_expires_at:%H:%M:%S} UTC" if stored.lease_expires_at else ""
            )
            raise RunConflict(
                f"run {run_id} is being advanced by another process ({stored.owner or 'queued'}"
                f"{until}); once its lease expires it can be taken over"
            )
        ctx = self._restore(checkpoint, progress)
        ctx.follow_up_of = stored.follow_up_of
        ctx.database = stored.database
        outcome = self.gate(run_id).outcome(checkpoint.batch_id)
        if str(outcome.status) == "pending":
            return ctx.results()
        self._reopen(ctx)
        self._check_schema(ctx, stored)
        ctx.stored = (
            "resuming",
            self.run_store.transition(
                run_id,
                expected=(stored.status, stored.version),
                status="resuming",
                owner=self.owner,
                lease_s=self.config.lease_s,
            ),
        )
        resumed = (checkpoint.cycle, resume_cycle(ctx, checkpoint.pending), outcome)
        return self._held(ctx, resumed=resumed)

    def recover(self, run_id: str, *, progress: Progress | None = None) -> list[RunResult]:
        """Take over a run whose process stopped (its lease expired), and carry it on.

        Before the gate the run starts again from its questions (its LLM calls are made, and
        charged, again: each question says so in its warnings); a batch the stopped process had
        opened is closed as superseded. After a decision the statements the stopped process had
        sent to the database are marked in doubt and never run again; those it had only
        claimed are released and run, with the rest. Raises
        ``RunConflict`` when the run is not stopped (someone holds a live lease, or it is
        paused or finished), ``WrongDatabase`` when it belongs to another database.
        """
        if self.run_store is None or self.approval_store is None:
            raise ValueError("recover needs the run_store and approval_store of the run")
        stored = self.run_store.load(run_id)
        self._check_database(stored)
        if not (stored.lease_expired() or (stored.status == "queued" and stored.owner is None)):
            raise RunConflict(f"run {run_id} is {stored.status}, not stopped: nothing to recover")
        version = self.run_store.transition(
            run_id,
            expected=(stored.status, stored.version),
            status="running" if stored.status in ("queued", "running") else stored.status,
            owner=self.owner,
            lease_s=self.config.lease_s,
            takeover=stored.owner is not None,
        )
        previous = stored.owner or "nobody"
        checkpoint = stored.checkpoint
        if isinstance(checkpoint, StartedCheckpoint):
            ctx = self._context(run_id, checkpoint.questions, progress, None)
            self._submitted(ctx, checkpoint.statements)
            ctx.policy = checkpoint.policy
            ctx.identity = self._needed(checkpoint.identity, ctx.policy)
            ctx.stored = ("running", version)
            ctx.follow_up_of = stored.follow_up_of
            ctx.database = stored.database
            self._supersede(run_id, keep=None, reason=f"run taken over from {previous}")
            if stored.owner is not None:
                for q in ctx.questions:
                    q.warnings.append(
                        f"the process advancing this run ({previous}) stopped before the "
                        "approval gate; the run was started again, so its LLM calls were made "
                        "(and counted against the rate limit) twice"
                    )
            for q in ctx.questions:
                stages.check_input(self, q)
            return self._held(ctx, resumed=None)
        if isinstance(checkpoint, ExecutedCheckpoint):  # only the answers were left
            ctx = self._restore(checkpoint, progress)
            ctx.stored = (stored.status, version)
            ctx.follow_up_of = stored.follow_up_of
            ctx.database = stored.database
            return self._held(ctx, resumed="executed")
        assert isinstance(checkpoint, PausedCheckpoint)  # resuming: it resumed from a pause
        ctx = self._restore(checkpoint, progress)
        ctx.follow_up_of = stored.follow_up_of
        ctx.database = stored.database
        self._reopen(ctx)
        self._check_schema(ctx, stored)
        ctx.stored = (stored.status, version)
        self._supersede(run_id, keep=checkpoint.batch_id, reason=f"run taken over from {previous}")
        outcome = self.gate(run_id).outcome(checkpoint.batch_id)
        resumed = (checkpoint.cycle, resume_cycle(ctx, checkpoint.pending), outcome)
        return self._held(ctx, resumed=resumed)

    def recover_all(self, *, limit: int = 100) -> list[str]:
        """Take over every stopped run of this database (cron-safe: each is claimed by exactly
        one process; other databases' runs are left to their own processes)."""
        assert self.run_store is not None
        recovered = []
        for stored in self.run_store.expired(limit=limit, target=self.db.identity):
            try:
                self.recover(stored.run_id)
            except RunConflict:
                continue  # another process took it first
            recovered.append(stored.run_id)
        return recovered

    # -- the run -------------------------------------------------------------------------------------

    def _check_database(self, stored: StoredRun) -> None:
        """``WrongDatabase`` unless the run was recorded for this pipeline's database, to
        execute as the login this process would execute it with (under the run's policy)."""
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

    def _schema_fingerprint(self) -> str | None:
        """The fingerprint of the schema this process validates against; None when it cannot be
        read now (the run then fails as before, and a resume validates again: unknown is
        treated as changed)."""
        try:
            return self.db.schema_fingerprint()
        except DatabaseError:
            return None

    def _check_schema(self, ctx: RunContext, stored: StoredRun) -> None:
        """Read the schema again; when it is not the one the statements were approved on (or
        that is unknown), they are validated again before they run."""
        try:
            now: str | None = self.db.schema_fingerprint(refresh=True)
        except DatabaseError:  # unreadable now: the run's stages report it as a database error
            now = None
        ctx.schema_changed = now is None or stored.schema_fingerprint != now

    @property
    def _durable(self) -> bool:
        """Runs of a pipeline that pauses at the gate are recorded and leased from the start."""
        return self.reviewer is None and self.run_store is not None

    def _context(
        self,
        run_id: str,
        questions: list[str],
        progress: Progress | None,
        on_result: ResultSink | None,
    ) -> RunContext:
        return RunContext(
            run_id=run_id,
            questions=[
                QuestionState(run_id, f"q{i + 1}", text, self.clock)
                for i, text in enumerate(questions)
            ],
            dialect=self.db.dialect,
            preview_rows=self.config.preview_rows,
            progress=progress or self.progress,
            on_result=on_result,
            release_streamed=on_result is not None and self.reviewer is not None,
        )

    def _needed(
        self, identity: object, policy: dict[str, object] | None
    ) -> dict[str, IdentityValue] | None:
        """Of the asker's attributes, those the run's policy's row filters name: what the run
        records, its batches show and its validators are bound to."""
        chosen = Policy.from_data(policy) if policy is not None else self.db.policy
        return needed_identity(identity, attributes_named(chosen.safety_policy().row_filters))

    @staticmethod
    def _submitted(ctx: RunContext, statements: Sequence[str] | None) -> None:
        """The caller's own SQL waits for the first approval cycle, one statement per question."""
        if statements is None:
            return
        if len(statements) != len(ctx.questions):
            raise ValueError(
                f"{len(statements)} statements for {len(ctx.questions)} purposes: give one each"
            )
        for q, sql in zip(ctx.questions, statements, strict=True):
            q.agent_sql = True
            q.pending_sql = sql
            q.note("submitted", q.text, sql, started=q.started)

    def _restore(
        self, checkpoint: PausedCheckpoint | ExecutedCheckpoint, progress: Progress | None
    ) -> RunContext:
        run_id = checkpoint.run_id
        ctx = RunContext(
            run_id=run_id,
            questions=[
                QuestionState.from_checkpoint(run_id, q, self.clock) for q in checkpoint.questions
            ],
            dialect=self.db.dialect,
            preview_rows=self.config.preview_rows,
            progress=progress or self.progress,
            calls_made=checkpoint.calls_made,
            policy=checkpoint.policy,
            identity=checked_identity(checkpoint.identity),
        )
        return ctx

    @staticmethod
    def _reopen(ctx: RunContext) -> None:
        """The questions that waited at the gate go on."""
        for q in ctx.questions:
            if q.status == RunStatus.AWAITING_APPROVAL:
                q.status = None
                if q.error is not None and q.error.code == "awaiting_approval":
                    q.error = None

    def _begin(
        self,
        run_id: str,
        questions: list[str],
        policy: dict[str, object] | None,
        follow_up_of: str | None = None,
        identity: Identity | None = None,
    ) -> tuple[tuple[str, int], StartedCheckpoint | None]:
        """Record the run as running under this process's lease (claiming it if queued); the
        checkpoint a queued run was recorded with (its policy and attributes) comes back with
        its (status, version)."""
        assert self.run_store is not None
        try:
            stored = self.run_store.load(run_id)
        except RunNotFound:
            self.run_store.create(
                run_id,
                self.db.safe_url,
                StartedCheckpoint(
                    run_id=run_id,
                    questions=questions,
                    policy=policy,
                    identity=dict(identity) if identity else None,
                ),
                status="running",
                owner=self.owner,
                lease_s=self.config.lease_s,
                follow_up_of=follow_up_of,
                schema_fingerprint=self._schema_fingerprint(),
                login=self.db.login_for(Policy.from_data(policy) if policy else None),
            )
            return ("running", 1), None
        if stored.status != "queued":
            raise RunConflict(f"run {run_id} already exists ({stored.status})")
        self._check_database(stored)
        version = self.run_store.transition(
            run_id,
            expected=("queued", stored.version),
            status="running",
            owner=self.owner,
            lease_s=self.config.lease_s,
        )
        queued = stored.checkpoint
        return ("running", version), (queued if isinstance(queued, StartedCheckpoint) else None)

    def _supersede(self, run_id: str, *, keep: str | None, reason: str) -> None:
        """Close the run's pending batches other than ``keep``: nobody will resume them."""
        assert self.approval_store is not None
        now = datetime.now(UTC)
        for record in self.approval_store.pending_batches(run_id=run_id):
            if record.batch_id != keep:
                supersede(self.approval_store, record, now, reason=reason, actor=self.owner)

    def _held(self, ctx: RunContext, *, resumed: Resumed) -> list[RunResult]:
        """Advance the run, holding its lease while a recorded run is advanced."""
        attributes: telemetry.Attributes = {
            "sqlgate.run_id": ctx.run_id,
            "sqlgate.questions": len(ctx.questions),
            "sqlgate.resumed": resumed is not None,
        }
        with telemetry.span("sqlgate.run", attributes) as run_span:
            if ctx.stored is None or self.run_store is None:
                results = self._advance(ctx, resumed=resumed)
            else:
                with Lease(
                    self.run_store, ctx.run_id, self.owner, lease_s=self.config.lease_s
                ) as lease:
                    ctx.lease = lease
                    results = self._advance(ctx, resumed=resumed)
            telemetry.run_ended(run_span, [RunStatus(r.status).value for r in results])
            return results

    def _advance(
        self,
        ctx: RunContext,
        *,
        resumed: Resumed,
    ) -> list[RunResult]:
        """The stages in order, from the start, from a decided gate, or (``"executed"``) from
        results whose answers are still to be written; pause or finish."""
        try:
            if resumed is None:
                asked = [q for q in ctx.active() if not q.agent_sql]  # the caller's SQL: as is
                with telemetry.stage("reasoning"):
                    stages.reason(self, ctx, asked)
                ctx.emit()
                with telemetry.stage("exploration"):
                    stages.explore(self, ctx, [q for q in asked if q.active])
                with telemetry.stage("generation"):
                    stages.generate(
                        self, ctx, [q for q in asked if q.active and q.after_synthesis is None]
                    )
                ctx.emit()
            if resumed != "executed":
                with telemetry.stage("approval", expected=(PausedAtGate,)):
                    stages.approve_and_execute(self, ctx, resumed=resumed)
                ctx.emit()
                self._executed(ctx)
            with telemetry.stage("synthesis"):
                stages.synthesize(
                    self, ctx, [q for q in ctx.active() if q.after_synthesis is not None]
                )
        except PausedAtGate as pause:
            self._pause(ctx, pause)
            return ctx.results()
        except RunConflict as lost:  # LeaseLost, or a checkpoint write refused for the same
            # reason: another process took the run over; what the state database holds is the truth.
            return self._after_lost_lease(ctx, lost)
        except RateLimitError as exc:  # exceeded, or a shared backend down: never unlimited
            for q in ctx.questions:
                q.finish(
                    RunStatus.RATE_LIMITED,
                    RunError(
                        code=exc.code,
                        message=str(exc),
                        retry_after=getattr(exc, "retry_after", None),
                    ),
                )
        except ApprovalCancelled as exc:
            why = str(exc).strip().rstrip(".")
            for q in ctx.questions:
                q.finish(
                    RunStatus.CANCELLED,
                    RunError(
                        code="approval_cancelled",
                        message=f"the approval was cancelled ({why}); nothing ran"
                        if why
                        else "the approval was cancelled; nothing ran",
                    ),
                )
        except (DatabaseError, SchemaInspectionError) as exc:
            for q in ctx.questions:
                q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
        except LLMError as exc:  # ends_run: the endpoint is down or refuses us; stop at once
            for q in ctx.questions:
                if q.active:
                    q.fail_call(exc)
        results = ctx.results()
        if ctx.stored is not None and self.run_store is not None:
            self.run_store.transition(
                ctx.run_id,
                expected=ctx.stored,
                status="finished",
                checkpoint=FinishedCheckpoint(results=results),
            )
        return results

    def _after_lost_lease(self, ctx: RunContext, lost: RunConflict) -> list[RunResult]:
        """The run's true outcome once this process lost it: the results the process that took
        it over recorded, or ``LeaseLost`` saying where the run stands now (never this
        process's half-done questions as if they had ended)."""
        assert self.run_store is not None
        stored = self.run_store.load(ctx.run_id)
        if isinstance(stored.checkpoint, FinishedCheckpoint):
            return list(stored.checkpoint.results)
        raise LeaseLost(
            f"{lost.message}; it is now {stored.status.replace('_', ' ')}"
            f"{f' (held by {stored.owner})' if stored.owner else ''}: "
            f"see `sqlgate runs show {ctx.run_id}`"
        )

    def _executed(self, ctx: RunContext) -> None:
        """Checkpoint the results before the answers are written: a takeover then only writes
        the answers, and runs nothing again."""
        if ctx.stored is None or self.run_store is None:
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
        version = self.run_store.transition(
            ctx.run_id,
            expected=ctx.stored,
            status=status,
            checkpoint=checkpoint,
            owner=self.owner,
            lease_s=self.config.lease_s,
        )
        ctx.stored = (status, version)

    def _pause(self, ctx: RunContext, pause: PausedAtGate) -> None:
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
        assert self.run_store is not None and ctx.stored is not None
        self.run_store.transition(
            ctx.run_id,
            expected=ctx.stored,
            status="awaiting_approval",
            checkpoint=checkpoint,
            schema_fingerprint=self._schema_fingerprint(),
        )


__all__ = ["CORRECTABLE_REFUSALS", "LARGE_SCHEMA_TABLES", "Pipeline", "PipelineConfig"]
