"""The pipeline, for one question or many, step by step as the design's table gives it.

    Batch 1 (reasoning) -> SchemaExplorer -> DataExplorer? -> [META: Batch 4]
    -> Batch 2 (SQL) -> SafetyValidator -> ONE approval cycle -> SQLExecutor (parallel)
    -> [errors: Batch 3, re-validate, ONE re-approval cycle; at most twice] -> ResultValidator
    -> Batch 4

A single question is a batch of one, so its call budget is the seed's: simple data question 3,
meta question 2, one correction 4, two corrections 5, unresolved ambiguity 1. With N questions
each batch packs up to ``k`` questions per call (fewer when the prompt would grow past
``max_prompt_chars``), so the calls grow as about 3·⌈N/k⌉.

The stages are plain functions in ``orchestrator.stages``; a run's state is a ``RunContext``
passed through them, so one ``Pipeline`` (and its one LLM client) serves many runs at once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from agents import SchemaInspectionError, SQLExecutor
from approvals import ApprovalCancelled, ApprovalGate, ApprovalOutcome, ApprovalStore, Reviewer
from orchestrator import stages
from orchestrator.batching import Progress
from orchestrator.checkpoint import FinishedCheckpoint, PausedCheckpoint
from orchestrator.database import TargetDatabase
from orchestrator.errors import DatabaseError, RunConflict
from orchestrator.llm import LLMClient
from orchestrator.memory import ReviewMemory, gate_policy
from orchestrator.question import PausedAtGate, PendingStatement, QuestionState
from orchestrator.result import RunError, RunResult, RunStatus
from orchestrator.run_context import ResultSink, RunContext, no_progress
from orchestrator.runs import RunStore
from orchestrator.stages.approval import CORRECTABLE_REFUSALS, resume_cycle
from ratelimit import RateLimitError
from safety import SafetyPolicy, SqlValidator

#: Above this many tables, Batch 1 sees a ranked, pruned catalogue and Batch 2 only the planned
#: tables plus the tables they refer to.
LARGE_SCHEMA_TABLES = 40


class PipelineConfig(BaseModel):
    row_cap: int = Field(default=1000, ge=1, description="rows fetched at most per query")
    max_limit: int = Field(default=1000, ge=1, description="LIMIT added or lowered to this")
    max_corrections: int = Field(default=2, ge=0, le=2, description="self-corrections per question")
    max_question_chars: int = Field(default=2000, ge=1)
    star: Literal["reject", "expand"] = Field(
        default="reject", description="SELECT * policy: reject or expand"
    )
    preview_rows: int = Field(default=20, ge=0, description="rows kept in the result object")
    k: int = Field(default=10, ge=1, description="questions per LLM call at most")
    max_prompt_chars: int = Field(
        default=60_000, ge=1000, description="a batched prompt is split before it grows past this"
    )
    parallelism: int = Field(default=4, ge=1, description="queries executed at once")
    approval_ttl_s: float | None = Field(
        default=None,
        gt=0,
        description="a batch not decided within this many seconds gets on_expiry",
    )
    on_expiry: Literal["reject", "approve"] = Field(
        default="reject", description="what a deadline does"
    )
    approval_quorum: int = Field(default=1, ge=1, description="distinct reviewers needed per batch")
    admission: bool = Field(
        default=False,
        description="refuse a run up front when its worst-case LLM requests do not fit the rate "
        "limit now (fail-fast limiters), instead of stopping half-way",
    )


class Pipeline:
    """Answers questions about one database, with every SQL statement approved before it runs.

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
        memory: ReviewMemory | None = None,
    ) -> None:
        if reviewer is None and (approval_store is None or run_store is None):
            raise ValueError(
                "a pipeline without a reviewer pauses at the gate: give it approval_store and run_store"
            )
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
        self.memory = memory  # reviewed-SQL memory: examples, notes, earned auto-approval

    # -- shared services -----------------------------------------------------------------------

    def validator(self) -> SqlValidator:
        return SqlValidator(
            dialect=self.db.dialect,
            policy=SafetyPolicy(max_limit=self.config.max_limit, star=self.config.star),
            schema={name: info.column_names() for name, info in self.db.schema.tables().items()},
        )

    def executor(self) -> SQLExecutor:
        return SQLExecutor(self.db.engine, row_cap=self.config.row_cap)

    def gate(self, run_id: str, validator: SqlValidator | None = None) -> ApprovalGate:
        return ApprovalGate(
            reviewer=self.reviewer,
            validate=(validator or self.validator()).validate,
            policy=gate_policy(self),
            store=self.approval_store,
            run_id=run_id,
            context={"dialect": self.db.dialect},  # so a reviewer elsewhere validates edits alike
            quorum=self.config.approval_quorum,
            ttl=timedelta(seconds=self.config.approval_ttl_s)
            if self.config.approval_ttl_s
            else None,
            on_expiry=self.config.on_expiry,
        )

    # -- public API --------------------------------------------------------------------------------

    def ask(self, question: str) -> RunResult:
        """Answer one question (a batch of one)."""
        return self.run_batch([question])[0]

    def run_batch(
        self,
        questions: Sequence[str],
        *,
        on_result: ResultSink | None = None,
        run_id: str | None = None,
        progress: Progress | None = None,
    ) -> list[RunResult]:
        """Answer many questions with batched LLM calls and ONE approval cycle per round.

        ``on_result(index, result)`` is called as soon as each question is finished (early for
        questions that stop early), so results can be streamed out before the batch ends. A
        streamed question's state is then let go, and ``run_batch`` returns an empty list.
        ``run_id`` names the run (a service answers with it before the run starts).
        """
        run_id = run_id or "run_" + uuid.uuid4().hex[:16]
        ctx = RunContext(
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
        for q in ctx.questions:
            stages.check_input(self, q)
        stages.admit(self, ctx)
        ctx.emit()
        self._advance(ctx, resumed=None, stored=None)
        results = ctx.results()
        return [] if on_result is not None else results

    def resume(self, run_id: str, *, progress: Progress | None = None) -> list[RunResult]:
        """Carry on with a run paused at the gate, once its batch is decided.

        Still undecided: the results say ``awaiting_approval`` and nothing changes. Decided:
        exactly one process wins the run (a conditional update), runs what was approved at most
        once (the approvals ledger), and finishes or pauses at the next cycle. A finished run
        returns its stored results; a statement whose execution was cut short is reported in
        doubt, never run again silently.
        """
        if self.run_store is None or self.approval_store is None:
            raise ValueError("resume needs the run_store and approval_store the run was paused in")
        stored = self.run_store.load(run_id)
        checkpoint = stored.checkpoint
        if isinstance(checkpoint, FinishedCheckpoint):
            return list(checkpoint.results)
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
        )
        if stored.status != "awaiting_approval":
            raise RunConflict(f"run {run_id} is being resumed by another process")
        outcome = self.gate(run_id).outcome(checkpoint.batch_id)
        if str(outcome.status) == "pending":
            return ctx.results()
        version = self.run_store.transition(
            run_id, expected=(stored.status, stored.version), status="resuming"
        )
        for q in ctx.questions:
            if q.status == RunStatus.AWAITING_APPROVAL:
                q.status = None
                if q.error is not None and q.error.code == "awaiting_approval":
                    q.error = None
        resumed = (checkpoint.cycle, resume_cycle(ctx, checkpoint.pending), outcome)
        return self._advance(ctx, resumed=resumed, stored=version)

    # -- the run -------------------------------------------------------------------------------------

    def _advance(
        self,
        ctx: RunContext,
        *,
        resumed: tuple[int, dict[str, PendingStatement], ApprovalOutcome] | None,
        stored: int | None,
    ) -> list[RunResult]:
        """The stages in order, from the start or from a decided gate; pause or finish."""
        try:
            if resumed is None:
                stages.reason(self, ctx, ctx.active())
                ctx.emit()
                stages.explore(self, ctx, ctx.active())
                stages.generate(self, ctx, [q for q in ctx.active() if q.after_synthesis is None])
                ctx.emit()
            stages.approve_and_execute(self, ctx, resumed=resumed)
            ctx.emit()
            stages.synthesize(self, ctx, [q for q in ctx.active() if q.after_synthesis is not None])
        except PausedAtGate as pause:
            self._pause(ctx, pause, stored)
            return ctx.results()
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
        except ApprovalCancelled:
            for q in ctx.questions:
                q.finish(
                    RunStatus.CANCELLED,
                    RunError(
                        code="approval_cancelled", message="the approval was cancelled; nothing ran"
                    ),
                )
        except (DatabaseError, SchemaInspectionError) as exc:
            for q in ctx.questions:
                q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
        results = ctx.results()
        if stored is not None and self.run_store is not None:
            self.run_store.transition(
                ctx.run_id,
                expected=("resuming", stored),
                status="finished",
                checkpoint=FinishedCheckpoint(results=results),
            )
        return results

    def _pause(self, ctx: RunContext, pause: PausedAtGate, stored: int | None) -> None:
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
            }
        )
        assert self.run_store is not None
        if stored is None:
            self.run_store.create(ctx.run_id, self.db.safe_url, checkpoint)
        else:
            self.run_store.transition(
                ctx.run_id,
                expected=("resuming", stored),
                status="awaiting_approval",
                checkpoint=checkpoint,
            )


__all__ = ["CORRECTABLE_REFUSALS", "LARGE_SCHEMA_TABLES", "Pipeline", "PipelineConfig"]
