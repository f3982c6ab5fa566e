"""The pipeline, for one question or many, step by step as the design's table gives it.

    Batch 1 (reasoning) -> SchemaExplorer -> DataExplorer? -> [META: Batch 4]
    -> Batch 2 (SQL) -> SafetyValidator -> ONE approval cycle -> SQLExecutor (parallel)
    -> [errors: Batch 3, re-validate, ONE re-approval cycle; at most twice] -> ResultValidator
    -> Batch 4

A single question is a batch of one, so its call budget is the seed's: simple data question 3,
meta question 2, one correction 4, two corrections 5, unresolved ambiguity 1. With N questions
each batch packs up to ``k`` questions per call (fewer when the prompt would grow past
``max_prompt_chars``), so the calls grow as about 3·⌈N/k⌉.

The stages are plain functions in ``orchestrator.core.stages``, given what they may use of the
pipeline (``stage_context``); a run's state is a ``RunContext`` passed through them, so one
``Pipeline`` (and its one LLM client) serves many runs at once. The features reach a run only
through the hooks it was given (``hooks``: ``RunHooks()`` runs with none).

This module is the run's lifecycle (start, pause at the gate, resume, take over a stopped run,
finish); the run store's side of each transition is ``run_record``, a run's context is made in
``run_start``, and its approval gate in ``run_gate``. What a run may read is the database's
policy: ``TargetDatabase`` is the one factory of the validator, the executor and the approval
batch's context.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence

from agents import SQLExecutor
from agents.catalogue import LARGE_SCHEMA_TABLES
from approvals import ApprovalGate, ApprovalStore, Reviewer
from orchestrator.core import stages, telemetry
from orchestrator.core.batching import Progress
from orchestrator.core.checkpoint import (
    ExecutedCheckpoint,
    FinishedCheckpoint,
    PausedCheckpoint,
    StartedCheckpoint,
)
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import RunConflict
from orchestrator.core.hooks import RunHooks
from orchestrator.core.identity import Identity
from orchestrator.core.lease import process_owner
from orchestrator.core.llm import LLMClient
from orchestrator.core.pipeline_config import PipelineConfig
from orchestrator.core.result import RunResult
from orchestrator.core.result_rows import ResultRowStore
from orchestrator.core.run_advance import Resumed, held
from orchestrator.core.run_context import ResultSink, RunContext, no_progress
from orchestrator.core.run_gate import open_gate
from orchestrator.core.run_record import RunRecord
from orchestrator.core.run_start import RunStart
from orchestrator.core.runs import RunStore
from orchestrator.core.stages.approval import CORRECTABLE_REFUSALS, resume_cycle
from orchestrator.core.state_patience import guard_beside
from safety import Policy, SqlValidator


class Pipeline:
    """Answers questions about one database, with every SQL statement approved before it runs.

    ``result_rows`` keeps every row a statement kept (the result object carries a preview);
    by default it is in the run store's database when there is one.

    ``hooks`` are the features' functions at the stages' boundaries (``orchestrator.wiring``
    gives every feature's: ``run_hooks(memory)``); without them the run uses none.

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
        hooks: RunHooks | None = None,
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
        self.hooks = hooks or RunHooks()  # the features: notes, examples, risk, memory, ...
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

    @property
    def can_wait(self) -> bool:
        """Runs are recorded, so a statement may wait at the gate for more reviewers."""
        return self.run_store is not None and self.approval_store is not None

    @property
    def _record(self) -> RunRecord:
        assert self.run_store is not None
        return RunRecord(self.run_store, self.db, owner=self.owner, lease_s=self.config.lease_s)

    @property
    def _start(self) -> RunStart:
        return RunStart(
            self.db, self.clock, self.progress, self.config.preview_rows, self.reviewer is not None
        )

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
        """The approval gate of a run, under ``policy`` (the run's; default the database's
        base policy): see ``run_gate.open_gate``."""
        chosen = policy or self.db.policy
        return open_gate(
            self,
            hooks=self.hooks,
            run_id=run_id,
            validator=validator or self.validator(chosen, identity),
            policy=chosen,
            reviewer=self.reviewer,
            store=self.approval_store,
            actor=self.actor,
            authors=self._authors(run_id),
            config=self.config,
            database=database,
            identity=identity,
        )

    # -- public API --------------------------------------------------------------------------------

    def ask(
        self,
        question: str,
        *,
        role: str | None = None,
        identity: Identity | None = None,
        hint: str | None = None,
    ) -> RunResult:
        """Answer one question (a batch of one)."""
        return self.run_batch([question], role=role, identity=identity, hints=[hint or ""])[0]

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
        hints: Sequence[str] | None = None,
    ) -> list[RunResult]:
        """Answer many questions with batched LLM calls and ONE approval cycle per round.

        ``on_result(index, result)`` is called as soon as each question is finished (early for
        questions that stop early), so results can be streamed out before the batch ends. A
        streamed question's state is then let go, and ``run_batch`` returns an empty list.
        ``run_id`` names the run (a service answers with it before the run starts; a run it
        recorded as ``queued`` is claimed here). ``follow_up_of`` links a follow-up (the answers
        to a run's clarifying questions, from the clarification feature) to that run.

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

        ``hints``: what the asker added to each question, in order (a benchmark-style hint,
        "female refers to gender = 'F'"): the catalogue ranks its words and the values it names
        with the question's, and the plan sees it beside the question. Recorded with the run: a
        run queued with hints (``queue``) keeps those, and a taken-over run plans with them.
        """
        run_id = run_id or "run_" + uuid.uuid4().hex[:16]
        start = self._start
        ctx = start.new(run_id, list(questions), progress, on_result, hints)
        start.submitted(ctx, statements)
        ctx.policy = self.db.policy_for(role).model_dump(mode="json")
        ctx.identity = start.needed(identity, ctx.policy)
        ctx.follow_up_of = follow_up_of
        ctx.database = self.db.safe_url
        if self._durable:
            ctx.stored, queued = self._record.begin(
                run_id, list(questions), ctx.policy, follow_up_of, ctx.identity, hints
            )
            if queued is not None:  # queued: what it was recorded with
                ctx.policy = queued.policy or ctx.policy
                ctx.identity = start.needed(queued.identity, ctx.policy)
                start.hinted(ctx, queued.hints)
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
        hints: Sequence[str] | None = None,
    ) -> None:
        """Record a run nobody advances yet (a service accepted it); ``run_batch`` claims it, and
        ``recover`` starts it if the service stops first. The run keeps the policy of ``role``
        (checked now: an unknown role is refused before anything is recorded), the asker's
        attributes ``identity`` and ``hints`` (one per question: ``run_batch``)."""
        chosen = self.db.policy_for(role)
        self._record.queue(
            run_id,
            questions,
            chosen,
            follow_up_of=follow_up_of,
            statements=statements,
            identity=self._start.needed(identity, chosen.model_dump(mode="json")),
            hints=hints,
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
        record = self._record
        record.check_database(stored)
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
        ctx = self._start.restored(checkpoint, progress)
        ctx.follow_up_of = stored.follow_up_of
        ctx.database = stored.database
        outcome = self.gate(run_id).outcome(checkpoint.batch_id)
        if str(outcome.status) == "pending":
            return ctx.results()
        RunStart.reopen(ctx)
        record.check_schema(ctx, stored)
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
        record, start = self._record, self._start
        record.check_database(stored)
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
            ctx = start.new(run_id, checkpoint.questions, progress, None, checkpoint.hints)
            start.submitted(ctx, checkpoint.statements)
            ctx.policy = checkpoint.policy
            ctx.identity = start.needed(checkpoint.identity, ctx.policy)
            ctx.stored = ("running", version)
            ctx.follow_up_of = stored.follow_up_of
            ctx.database = stored.database
            record.supersede(
                self.approval_store, run_id, keep=None, reason=f"run taken over from {previous}"
            )
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
            ctx = start.restored(checkpoint, progress)
            ctx.stored = (stored.status, version)
            ctx.follow_up_of = stored.follow_up_of
            ctx.database = stored.database
            return self._held(ctx, resumed="executed")
        assert isinstance(checkpoint, PausedCheckpoint)  # resuming: it resumed from a pause
        ctx = start.restored(checkpoint, progress)
        ctx.follow_up_of = stored.follow_up_of
        ctx.database = stored.database
        RunStart.reopen(ctx)
        record.check_schema(ctx, stored)
        ctx.stored = (stored.status, version)
        record.supersede(
            self.approval_store,
            run_id,
            keep=checkpoint.batch_id,
            reason=f"run taken over from {previous}",
        )
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

    @property
    def _durable(self) -> bool:
        """Runs of a pipeline that pauses at the gate are recorded and leased from the start."""
        return self.reviewer is None and self.run_store is not None

    def _held(self, ctx: RunContext, *, resumed: Resumed) -> list[RunResult]:
        return held(
            self, self._record if self.run_store is not None else None, ctx, resumed=resumed
        )


__all__ = ["CORRECTABLE_REFUSALS", "LARGE_SCHEMA_TABLES", "Pipeline", "PipelineConfig"]
