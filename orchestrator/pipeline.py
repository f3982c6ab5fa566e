"""The pipeline, for one question or many, step by step as the design's table gives it.

    Batch 1 (reasoning) -> SchemaExplorer -> DataExplorer? -> [META: Batch 4]
    -> Batch 2 (SQL) -> SafetyValidator -> ONE approval cycle -> SQLExecutor (parallel)
    -> [errors: Batch 3, re-validate, ONE re-approval cycle; at most twice] -> ResultValidator
    -> Batch 4

A single question is a batch of one, so its call budget is the seed's: simple data question 3,
meta question 2, one correction 4, two corrections 5, unresolved ambiguity 1. With N questions
each batch packs up to ``k`` questions per call (fewer when the prompt would grow past
``max_prompt_chars``), so the calls grow as about 3·⌈N/k⌉.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from agents import (
    DEFAULT_MAX_TABLES,
    DataExplorer,
    ExecutionError,
    Intent,
    ReasoningAgent,
    ResponseSynthesizer,
    ResultValidator,
    SchemaContext,
    SchemaInspectionError,
    SelfCorrection,
    SQLExecutor,
    SQLGenerator,
    batch_catalogue,
    rank_tables,
)
from agents.llm_batch import QuestionInput
from agents.response_synthesizer import (
    PREVIEW_ROWS,
    describe_failure,
    describe_result,
    describe_schema,
)
from approvals import (
    AlreadyExecuted,
    ApprovalCancelled,
    ApprovalGate,
    ApprovalItem,
    DecisionError,
    ExecutionInDoubt,
)
from orchestrator.batching import BatchedCalls, Progress
from orchestrator.database import TargetDatabase
from orchestrator.errors import DatabaseError
from orchestrator.llm import LLMClient
from orchestrator.question import PausedAtGate, PendingStatement, QuestionState
from orchestrator.result import (
    ApprovalRecord,
    ClarifyingQuestionOut,
    RunError,
    RunResult,
    RunStatus,
)
from orchestrator.runs import RunConflict, RunStore
from ratelimit import RateLimitError
from safety import SafetyPolicy, SqlValidator

#: Validator refusals a model can fix by rewriting (the others are attacks: they are not retried).
CORRECTABLE_REFUSALS = frozenset({"select_star", "parse_error", "unknown_table", "unknown_column"})

#: Above this many tables, Batch 1 sees a ranked, pruned catalogue and Batch 2 only the planned
#: tables plus the tables they refer to.
LARGE_SCHEMA_TABLES = 40


class PipelineConfig(BaseModel):
    row_cap: int = Field(default=1000, ge=1, description="rows fetched at most per query")
    max_limit: int = Field(default=1000, ge=1, description="LIMIT added or lowered to this")
    max_corrections: int = Field(default=2, ge=0, le=2, description="self-corrections per question")
    max_question_chars: int = Field(default=2000, ge=1)
    star: str = Field(default="reject", description="SELECT * policy: reject or expand")
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
    it in any process. ``progress(stage, done, total)`` follows the stages (spinner, bars).
    """

    def __init__(
        self,
        database: TargetDatabase,
        llm: LLMClient,
        reviewer: Any,
        *,
        config: PipelineConfig | None = None,
        approval_store: Any | None = None,
        run_store: RunStore | None = None,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.perf_counter,
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
        for store in (approval_store, run_store):
            if store is not None:
                store.setup()  # idempotent: creates or migrates the tables
        self.progress: Progress = progress or (lambda stage, done=0, total=0: None)
        self.clock = clock
        self._on_result: Callable[[int, RunResult], None] | None = None

    # -- public API --------------------------------------------------------------------------------

    def ask(self, question: str) -> RunResult:
        """Answer one question (a batch of one)."""
        return self.run_batch([question])[0]

    def run_batch(
        self,
        questions: Sequence[str],
        *,
        on_result: Callable[[int, RunResult], None] | None = None,
        run_id: str | None = None,
    ) -> list[RunResult]:
        """Answer many questions with batched LLM calls and ONE approval cycle per round.

        ``on_result(index, result)`` is called as soon as each question is finished (early for
        questions that stop early), so results can be streamed out before the batch ends. A
        streamed question's state is then let go, and ``run_batch`` returns an empty list.
        ``run_id`` names the run (a service answers with it before the run starts).
        """
        run_id = run_id or "run_" + uuid.uuid4().hex[:16]
        qs = [
            QuestionState(run_id, f"q{i + 1}", text, self.clock) for i, text in enumerate(questions)
        ]
        self._start(qs, on_result, self.llm.calls)
        for q in qs:
            self._check_input(q)
        self._admit(qs)
        self._emit()
        self._run(qs, run_id, resume=None, stored=None)
        results = self._results(qs)
        return [] if on_result is not None else results

    def resume(self, run_id: str) -> list[RunResult]:
        """Carry on with a run paused at the gate, once its batch is decided.

        Still undecided: the results say ``awaiting_approval`` and nothing changes. Decided:
        exactly one process wins the run (a conditional update), runs what was approved at most
        once (the approvals ledger), and finishes or pauses at the next cycle. A finished run
        returns its stored results; a statement whose execution was cut short is reported in
        doubt, never run again silently.
        """
        if self.run_store is None or self.approval_store is None:
            raise ValueError("resume needs the run_store and approval_store the run was paused in")
        status, version, _database, checkpoint = self.run_store.load(run_id)
        if status == "finished":
            return [RunResult.model_validate(r) for r in checkpoint["results"]]
        qs = [QuestionState.from_state(run_id, q, self.clock) for q in checkpoint["questions"]]
        if status != "awaiting_approval":
            raise RunConflict(f"run {run_id} is being resumed by another process")
        gate = self._gate(run_id)
        outcome = gate.outcome(checkpoint["batch_id"])
        if str(outcome.status) == "pending":
            return self._results(qs)
        version = self.run_store.transition(run_id, expected=(status, version), status="resuming")
        for q in qs:
            if q.status == RunStatus.AWAITING_APPROVAL:
                q.status = None
                if q.error is not None and q.error.code == "awaiting_approval":
                    q.error = None
        self._start(qs, None, self.llm.calls - checkpoint["calls_made"])
        self._final: list[RunResult] | None = None
        self._run(qs, run_id, resume=(checkpoint, outcome), stored=version)
        return self._final if self._final is not None else self._results(qs)

    def _start(self, qs: list[QuestionState], on_result: Any, calls_before: int) -> None:
        self._on_result = on_result
        self._emitted: set[str] = set()
        self._all = qs
        self._calls_before = calls_before
        self._call = BatchedCalls(
            self.llm,
            k=self.config.k,
            max_prompt_chars=self.config.max_prompt_chars,
            progress=self.progress,
            calls_before=calls_before,
        )

    def _results(self, qs: list[QuestionState]) -> list[RunResult]:
        self._emit()
        return [q.to_result(self.db.dialect, self.config.preview_rows) for q in qs]

    def _emit(self) -> None:
        """Hand every newly finished question to ``on_result``."""
        if self._on_result is None:
            return
        for index, q in enumerate(self._all):
            if (
                q.status is not None
                and q.status != RunStatus.AWAITING_APPROVAL
                and q.qid not in self._emitted
            ):
                self._emitted.add(q.qid)
                self._on_result(index, q.to_result(self.db.dialect, self.config.preview_rows))
                if self.reviewer is not None:  # nothing will checkpoint it: let its state go
                    q.release()

    # -- the stages ---------------------------------------------------------------------------------

    def _run(
        self, qs: list[QuestionState], run_id: str, *, resume: Any, stored: int | None
    ) -> None:
        try:
            if resume is None:
                self._reason([q for q in qs if q.active])
                self._emit()
                self._explore([q for q in qs if q.active])
                self._generate([q for q in qs if q.active and q.after_synthesis is None])
                self._emit()
            self._approve_and_execute(qs, run_id, resume=resume)
            self._emit()
            self._synthesize([q for q in qs if q.active and q.after_synthesis is not None])
        except PausedAtGate as pause:
            self._pause(qs, run_id, pause, stored)
            return
        except RateLimitError as exc:  # exceeded, or a shared backend down: never unlimited
            for q in qs:
                q.finish(
                    RunStatus.RATE_LIMITED,
                    RunError(
                        code=exc.code,
                        message=str(exc),
                        retry_after=getattr(exc, "retry_after", None),
                    ),
                )
        except ApprovalCancelled:
            for q in qs:
                q.finish(
                    RunStatus.CANCELLED,
                    RunError(
                        code="approval_cancelled", message="the approval was cancelled; nothing ran"
                    ),
                )
        except (DatabaseError, SchemaInspectionError) as exc:
            for q in qs:
                q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
        if stored is not None and self.run_store is not None:
            self._emit()
            final = [q.to_result(self.db.dialect, self.config.preview_rows) for q in qs]
            self.run_store.transition(
                run_id,
                expected=("resuming", stored),
                status="finished",
                checkpoint={"results": [r.model_dump(mode="json") for r in final]},
            )
            self._final = final

    def _pause(
        self, qs: list[QuestionState], run_id: str, pause: PausedAtGate, stored: int | None
    ) -> None:
        """Checkpoint the run at the gate; its questions wait with ``awaiting_approval``."""
        waiting = {p.q.qid for p in pause.pending.values()}
        for q in qs:
            if q.active and (
                q.qid in waiting or q.after_synthesis is not None or q.correction_error
            ):
                q.status = RunStatus.AWAITING_APPROVAL
                q.error = q.error or RunError(
                    code="awaiting_approval",
                    message=f"waiting for a decision on approval batch {pause.batch_id}; then: sqlgate resume {run_id}",
                )
        checkpoint = {
            "run_id": run_id,
            "dialect": self.db.dialect,
            "calls_made": self.llm.calls - self._calls_before,
            "cycle": pause.cycle,
            "batch_id": pause.batch_id,
            "pending": {
                cid: [p.q.qid, p.ok, p.code, p.message] for cid, p in pause.pending.items()
            },
            "questions": [q.to_state() for q in qs],
        }
        assert self.run_store is not None
        if stored is None:
            self.run_store.create(run_id, self.db.safe_url, checkpoint)
        else:
            self.run_store.transition(
                run_id,
                expected=("resuming", stored),
                status="awaiting_approval",
                checkpoint=checkpoint,
            )

    def _admit(self, qs: list[QuestionState]) -> None:
        """Admission control: the worst case is 5 requests per chunk of questions."""
        active = [q for q in qs if q.active]
        if (
            not self.config.admission
            or not active
            or getattr(self.llm.limiter, "mode", "") != "fail_fast"
        ):
            return
        chunks = -(-len(active) // self.config.k)
        worst = (3 + self.config.max_corrections) * chunks
        wait = self.llm.limiter.fits(worst)
        if wait > 0:
            message = (
                f"this run may need up to {worst} LLM requests and the rate limit has room for fewer "
                "now; nothing was sent"
            )
            for q in active:
                q.finish(
                    RunStatus.RATE_LIMITED,
                    RunError(
                        code="rate_limited",
                        message=message,
                        retry_after=None if wait == float("inf") else wait,
                    ),
                )

    def _check_input(self, q: QuestionState) -> None:
        text = q.text.strip()
        if not text:
            q.finish(
                RunStatus.INVALID_INPUT,
                RunError(code="empty_question", message="the question is empty"),
            )
        elif len(text) > self.config.max_question_chars:
            q.finish(
                RunStatus.INVALID_INPUT,
                RunError(
                    code="question_too_long",
                    message=f"the question has {len(text)} characters; the limit is "
                    f"{self.config.max_question_chars}",
                ),
            )

    def _reason(self, qs: list[QuestionState]) -> None:
        if not qs:
            return
        started = self.clock()
        tables = self.db.schema.tables()
        self._catalogue_ms = (self.clock() - started) * 1000.0
        agent = ReasoningAgent()

        def build(items: list[QuestionInput]) -> list[dict[str, str]]:
            catalogue = batch_catalogue(
                [i.question for i in items], tables, always_include_all_below=LARGE_SCHEMA_TABLES
            )
            return agent.build_messages(items, catalogue, self.db.dialect)

        inputs = lambda q: QuestionInput(q.qid, q.text.strip())  # noqa: E731
        for q, reasoning, call in self._call("reasoning", agent, qs, build, inputs):
            q.reasoning = reasoning
            c = reasoning.clarification
            outputs = {
                "IntentAnalyzer": f"{reasoning.intent.intent.value} ({reasoning.intent.confidence:.2f})",
                "ClarificationAgent": (
                    f"resolved, {len(c.assumptions)} assumption(s)"
                    if c.resolved
                    else f"unresolved, {len(c.questions)} question(s)"
                ),
                "QueryDecomposer": f"{reasoning.decomposition.complexity}, "
                f"{len(reasoning.decomposition.steps)} step(s)",
                "QueryPlanner": f"tables: {', '.join(reasoning.plan.tables) or '-'}; "
                f"data context: {'yes' if reasoning.plan.needs_data_context else 'no'}",
            }
            for name in ReasoningAgent.agents:
                q.note(name, q.text, outputs[name], batch=1, call=call)
            q.assumptions = list(c.assumptions)
            if not c.resolved:
                q.clarification_questions = _unique_questions(c.questions)
                q.finish(RunStatus.NEEDS_CLARIFICATION)

    def _explore(self, qs: list[QuestionState]) -> None:
        if not qs:
            return
        all_tables = self.db.schema.tables()
        large = len(all_tables) > LARGE_SCHEMA_TABLES
        for done, q in enumerate(qs):
            self.progress("exploring schema", done, len(qs))
            started = self.clock()
            planned = list(q.reasoning.plan.tables)
            if not planned or not self.db.schema.explore(planned, neighbours=False).tables:
                # Nothing usable planned: the whole schema if small, else the best-ranked tables.
                planned = (
                    rank_tables(q.text, all_tables, limit=DEFAULT_MAX_TABLES)
                    if large
                    else list(all_tables)
                )
            q.schema = self.db.schema.explore(planned, incoming=not large)
            q.note(
                "SchemaExplorer",
                f"planned tables: {', '.join(planned) or '-'}",
                q.schema.summary(),
                started=started,
                extra_ms=getattr(self, "_catalogue_ms", 0.0),
            )
            if q.reasoning.intent.intent == Intent.META_QUERY:
                q.failure = None
                q.after_synthesis = RunStatus.ANSWERED
                q.meta_outcome = describe_schema(q.schema.render())
                continue
            filters = list(q.reasoning.plan.filters)
            if q.reasoning.plan.needs_data_context and filters:
                started = self.clock()
                explored = DataExplorer(self.db.engine).explore(filters, schema=q.schema)
                q.data_context = explored.render()
                q.note(
                    "DataExplorer",
                    f"{len(filters)} filter column(s)",
                    explored.summary(),
                    started=started,
                )
        self.progress("exploring schema", len(qs), len(qs))

    def _generate(self, qs: list[QuestionState]) -> None:
        if not qs:
            return
        agent = SQLGenerator()

        def build(items: list[QuestionInput]) -> list[dict[str, str]]:
            chunk = [by_id[i.id] for i in items]
            return agent.build_messages(
                items,
                self._schema_text(chunk),
                _joined(q.data_context for q in chunk),
                self.db.dialect,
            )

        by_id = {q.qid: q for q in qs}

        def inputs(q: QuestionState) -> QuestionInput:
            return QuestionInput(q.qid, q.text.strip(), SQLGenerator.question_context(q.reasoning))

        for q, draft, call in self._call("writing SQL", agent, qs, build, inputs):
            q.pending_sql = draft.sql
            q.note("SQLGenerator", q.text, draft.sql, batch=2, call=call)

    def _gate(self, run_id: str, validator: SqlValidator | None = None) -> ApprovalGate:
        return ApprovalGate(
            reviewer=self.reviewer,
            validate=(validator or self._validator()).validate,
            store=self.approval_store,
            run_id=run_id,
            context={"dialect": self.db.dialect},  # so a reviewer elsewhere validates edits alike
            quorum=self.config.approval_quorum,
            ttl=timedelta(seconds=self.config.approval_ttl_s)
            if self.config.approval_ttl_s
            else None,
            on_expiry=self.config.on_expiry,
        )

    def _validator(self) -> SqlValidator:
        return SqlValidator(
            dialect=self.db.dialect,
            policy=SafetyPolicy(max_limit=self.config.max_limit, star=self.config.star),
            schema={name: info.column_names() for name, info in self.db.schema.tables().items()},
        )

    def _approve_and_execute(
        self, qs: list[QuestionState], run_id: str, *, resume: Any = None
    ) -> None:
        """Approval cycles: validate, ONE review for everything waiting, run; correct; repeat."""
        validator = self._validator()
        gate = self._gate(run_id, validator)
        executor = SQLExecutor(self.db.engine, row_cap=self.config.row_cap)
        cycle = 0
        if resume is not None:
            checkpoint, outcome = resume
            cycle = checkpoint["cycle"]
            by_id = {q.qid: q for q in qs}
            pending = {
                cid: PendingStatement(by_id[qid], None, ok, code, message)
                for cid, (qid, ok, code, message) in checkpoint["pending"].items()
            }
            gate.ledger.recover(run_id=run_id)  # claims of a worker that died mid-run: in doubt
            self._after_review(pending, outcome, cycle, executor, gate, qs)
        while True:
            waiting = [q for q in qs if q.active and q.pending_sql is not None]
            if not waiting:
                return
            cycle += 1
            pending = self._validate_all(waiting, validator, cycle)
            outcome = self._decide(pending, gate, cycle)
            self._after_review(pending, outcome, cycle, executor, gate, qs)

    def _after_review(
        self,
        pending: dict[str, PendingStatement],
        outcome: Any,
        cycle: int,
        executor: SQLExecutor,
        gate: ApprovalGate,
        qs: list[QuestionState],
    ) -> None:
        self._execute(self._apply(pending, outcome, cycle), executor, gate)
        needing = [q for q in qs if q.active and q.correction_error is not None]
        if needing:
            self._correct(needing)

    def _validate_all(
        self, qs: list[QuestionState], validator: SqlValidator, cycle: int
    ) -> dict[str, PendingStatement]:
        pending: dict[str, PendingStatement] = {}
        for q in qs:
            sql, q.pending_sql = q.pending_sql, None
            started = self.clock()
            validation = validator.validate(sql)
            refusal = validation.refusal
            q.note(
                "SafetyValidator",
                sql,
                "accepted" + _rewrites(validation)
                if validation.ok
                else f"refused: {refusal.code}: {refusal.message}",
                started=started,
                ok=validation.ok,
            )
            q.sql = validation.sql if validation.ok else sql
            item = ApprovalItem.new(
                question_id=f"{q.run_id}:{q.qid}",
                question=q.text,
                sql=q.sql,
                findings=list(validation.findings),
                refused=not validation.ok,
                cycle=cycle,
            )
            pending[item.call_id] = PendingStatement(
                q,
                item,
                validation.ok,
                refusal.code if refusal else None,
                refusal.message if refusal else None,
            )
        return pending

    def _decide(self, pending: dict[str, PendingStatement], gate: ApprovalGate, cycle: int) -> Any:
        """ONE review of every statement of the cycle; or, with no reviewer here, pause."""
        items = [p.item for p in pending.values() if p.item is not None]
        self.progress("waiting for approval", 0, len(items))
        if self.reviewer is None:
            batch = gate.open(items)
            if batch.pending:
                raise PausedAtGate(batch.batch_id, cycle, pending)
            return gate.outcome(batch.batch_id)
        try:
            return gate.review(items)
        except DecisionError as exc:
            raise ApprovalCancelled(f"the decision was refused: {exc}") from exc

    def _apply(
        self, pending: dict[str, PendingStatement], outcome: Any, cycle: int
    ) -> list[tuple[QuestionState, Any, str]]:
        runnable = []
        for call_id, p in pending.items():
            q = p.q
            resolution = outcome.resolutions[call_id]
            status = str(getattr(resolution.status, "value", resolution.status))
            q.approvals.append(
                ApprovalRecord(
                    cycle=cycle,
                    batch_id=outcome.batch_id,
                    call_id=call_id,
                    status=status,
                    sql=resolution.sql,
                    reason=resolution.reason,
                )
            )
            if not p.ok:
                if p.code in CORRECTABLE_REFUSALS and q.corrections < self.config.max_corrections:
                    q.correction_error = f"{p.code}: {p.message}"
                    continue
                q.answer = (
                    f"sqlgate refused the generated SQL ({p.code}): {p.message} Nothing was run."
                )
                q.finish(
                    RunStatus.UNSAFE, RunError(code=p.code or "refused", message=p.message or "")
                )
            elif status == "rejected":
                reason = resolution.reason or "no reason given"
                if reason.startswith("expired:"):  # the batch's deadline decided, not a person
                    q.failure = (
                        "nobody decided on it before the approval deadline, so it was not run"
                    )
                    q.error = RunError(code="approval_expired", message=reason)
                else:
                    q.failure = f"a reviewer rejected it: {reason}"
                    q.error = RunError(code="rejected_by_reviewer", message=reason)
                q.after_synthesis = RunStatus.REJECTED
            else:
                runnable.append((q, outcome, call_id))
        return runnable

    def _execute(
        self,
        runnable: list[tuple[QuestionState, Any, str]],
        executor: SQLExecutor,
        gate: ApprovalGate,
    ) -> None:
        if not runnable:
            return
        self.progress("running SQL", 0, len(runnable))
        finished = [0]

        def run_one(
            entry: tuple[QuestionState, Any, str],
        ) -> tuple[QuestionState, Any, BaseException | None, float]:
            q, outcome, call_id = entry
            started = self.clock()
            try:
                with gate.ledger.executing(outcome, call_id) as sql:
                    q.sql = sql  # byte-for-byte what was approved (or edited)
                    return q, executor.run(sql), None, started
            except ExecutionError as exc:
                return q, None, exc, started
            except (AlreadyExecuted, ExecutionInDoubt) as exc:
                return q, None, ExecutionError("execution_in_doubt", str(exc)), started
            finally:
                finished[0] += 1
                self.progress("running SQL", finished[0], len(runnable))

        if len(runnable) == 1:
            done = [run_one(runnable[0])]
        else:
            with ThreadPoolExecutor(
                max_workers=min(self.config.parallelism, len(runnable))
            ) as pool:
                done = list(pool.map(run_one, runnable))

        for q, result, exc, started in done:
            if exc is None:
                q.note(
                    "SQLExecutor",
                    q.sql or "",
                    f"{result.row_count} row(s)" + (" (row cap hit)" if result.truncated else ""),
                    started=started,
                )
                q.result = result
                self._check_result(q)
                continue
            q.note(
                "SQLExecutor", q.sql or "", f"{exc.code}: {exc.message}", started=started, ok=False
            )
            if exc.code == "database_unreachable":
                q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
            elif exc.code == "execution_in_doubt":  # never re-run what may have run
                q.finish(RunStatus.EXECUTION_FAILED, RunError(code=exc.code, message=exc.message))
            elif exc.timed_out:
                q.failure = f"statement timeout: {exc.message}"
                q.after_synthesis = RunStatus.TIMED_OUT
                q.error = RunError(code=exc.code, message=exc.message)
            elif q.corrections < self.config.max_corrections:
                q.correction_error = exc.message
            else:
                q.failure = exc.message
                q.after_synthesis = RunStatus.EXECUTION_FAILED
                q.error = RunError(code=exc.code, message=exc.message)

    def _check_result(self, q: QuestionState) -> None:
        started = self.clock()
        q.warnings += ResultValidator().check(q.result)
        # Keep what the answer and the result object use, not every fetched row.
        q.result.rows = q.result.rows[: max(self.config.preview_rows, PREVIEW_ROWS)]
        q.note(
            "ResultValidator",
            f"{q.result.row_count} row(s)",
            "; ".join(q.warnings) or "no warnings",
            started=started,
        )
        q.after_synthesis = RunStatus.ANSWERED

    def _correct(self, qs: list[QuestionState]) -> None:
        agent = SelfCorrection()
        for q in qs:
            q.corrections += 1
        by_id = {q.qid: q for q in qs}

        def build(items: list[QuestionInput]) -> list[dict[str, str]]:
            return agent.build_messages(
                items, self._schema_text([by_id[i.id] for i in items]), self.db.dialect
            )

        def inputs(q: QuestionState) -> QuestionInput:
            return QuestionInput(
                q.qid,
                q.text.strip(),
                SelfCorrection.question_context(
                    q.sql or "", q.correction_error or "", q.corrections
                ),
            )

        for q, fix, call in self._call("correcting SQL", agent, qs, build, inputs):
            q.note("SelfCorrection", q.correction_error or "", fix.sql, batch=3, call=call)
            q.pending_sql = fix.sql
        for q in qs:
            q.correction_error = None

    def _synthesize(self, qs: list[QuestionState]) -> None:
        if not qs:
            return
        agent = ResponseSynthesizer()

        def outcome(q: QuestionState) -> str:
            if q.meta_outcome is not None:
                return q.meta_outcome
            if q.result is not None:
                return describe_result(
                    q.sql or "", q.result.columns, q.result.rows, q.result.row_count
                )
            return describe_failure(q.sql, q.failure or "unknown failure")

        def inputs(q: QuestionState) -> QuestionInput:
            return QuestionInput(
                q.qid,
                q.text.strip(),
                ResponseSynthesizer.question_context(outcome(q), q.assumptions, q.warnings),
            )

        for q, answer, call in self._call(
            "writing the answer", agent, qs, agent.build_messages, inputs
        ):
            q.answer = answer.answer
            q.warnings += [c for c in answer.caveats if c not in q.warnings]
            q.note("ResponseSynthesizer", outcome(q), answer.answer, batch=4, call=call)
            q.finish(q.after_synthesis or RunStatus.ANSWERED, q.error)
            self._emit()

    def _schema_text(self, qs: list[QuestionState]) -> str:
        """The explored tables of several questions, each table once."""
        tables: dict[str, Any] = {}
        for q in qs:
            for table in q.schema.tables if q.schema else ():
                tables.setdefault(table.name, table)
        if len(qs) == 1 and qs[0].schema is not None:
            return qs[0].schema.render()
        return SchemaContext(dialect=self.db.dialect, tables=list(tables.values())).render()


def _unique_questions(questions: list[Any]) -> list[ClarifyingQuestionOut]:
    """The clarifying questions with ids unique within the question (models repeat ids)."""
    if not questions:
        return [
            ClarifyingQuestionOut(
                id="c1",
                text="Could you restate the question naming the measure and the data you mean?",
            )
        ]
    seen: set[str] = set()
    out = []
    for n, q in enumerate(questions, start=1):
        qid = q.id.strip() or f"c{n}"
        if qid in seen:
            qid = f"c{n}"
        while qid in seen:
            qid += "_"
        seen.add(qid)
        out.append(ClarifyingQuestionOut(id=qid, text=q.text))
    return out


def _joined(parts: Iterable[str]) -> str:
    seen: list[str] = []
    for part in parts:
        for line in part.splitlines():
            if line not in seen:
                seen.append(line)
    return "\n".join(seen)


def _rewrites(validation: Any) -> str:
    rewrites = [f.code for f in validation.findings if getattr(f, "severity", "") == "rewrite"]
    return f" (rewrites: {', '.join(rewrites)})" if rewrites else ""


__all__ = ["CORRECTABLE_REFUSALS", "LARGE_SCHEMA_TABLES", "Pipeline", "PipelineConfig"]
