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
from typing import Any

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
from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, split_results
from agents.response_synthesizer import PREVIEW_ROWS, describe_failure, describe_result, describe_schema
from approvals import ApprovalCancelled, ApprovalGate, ApprovalItem, DecisionError
from orchestrator.database import TargetDatabase
from orchestrator.errors import DatabaseError, LLMError
from orchestrator.llm import LLMCall, LLMClient, TokenUsage, redact
from orchestrator.result import ApprovalRecord, ClarifyingQuestionOut, RunError, RunResult, RunStatus, TraceEntry
from ratelimit import RateLimitError
from safety import SafetyPolicy, SqlValidator

#: Validator refusals a model can fix by rewriting (the others are attacks: they are not retried).
CORRECTABLE_REFUSALS = frozenset({"select_star", "parse_error", "unknown_table", "unknown_column"})

#: Above this many tables, Batch 1 sees a ranked, pruned catalogue and Batch 2 only the planned
#: tables plus the tables they refer to.
LARGE_SCHEMA_TABLES = 40

#: ``progress(stage, done, total)``: the stage's name and how many of its questions are done.
Progress = Callable[[str, int, int], None]


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
    admission: bool = Field(
        default=False,
        description="refuse a run up front when its worst-case LLM requests do not fit the rate "
        "limit now (fail-fast limiters), instead of stopping half-way",
    )


class _Question:
    """One question's state as it moves through the stages."""

    def __init__(self, run_id: str, qid: str, text: str, clock: Callable[[], float]) -> None:
        self.run_id = run_id
        self.qid = qid
        self.text = text
        self.clock = clock
        self.started = clock()
        self.status: RunStatus | None = None  # set once the question is finished
        self.error: RunError | None = None
        self.reasoning: Any = None
        self.schema: SchemaContext | None = None
        self.data_context = ""
        self.pending_sql: str | None = None  # SQL waiting for the next approval cycle
        self.sql: str | None = None
        self.failure: str | None = None  # why there is no result, for the answer
        self.after_synthesis: RunStatus | None = None  # the status once the answer is written
        self.correction_error: str | None = None
        self.meta_outcome: str | None = None  # the schema, for a question about the database itself
        self.corrections = 0
        self.result: Any = None
        self.answer: str | None = None
        self.assumptions: list[str] = []
        self.warnings: list[str] = []
        self.clarification_questions: list[ClarifyingQuestionOut] = []
        self.approvals: list[ApprovalRecord] = []
        self.trace: list[TraceEntry] = []
        self.tokens = TokenUsage()
        self.calls: set[int] = set()
        self.http_requests = 0

    @property
    def active(self) -> bool:
        return self.status is None

    def finish(self, status: RunStatus, error: RunError | None = None) -> None:
        if self.status is None:
            self.status, self.error = status, error

    def took_part(self, call: LLMCall, call_index: int, shared_by: int) -> None:
        if call_index not in self.calls:
            self.calls.add(call_index)
            self.http_requests += call.http_requests
            self.tokens = self.tokens + TokenUsage(
                prompt=call.tokens.prompt // shared_by, completion=call.tokens.completion // shared_by
            )

    def took_part_in_failed(self, exc: LLMError) -> None:
        """A call that ended in an error still cost requests: count them."""
        index = getattr(exc, "call_index", None)
        if index is not None and index not in self.calls:
            self.calls.add(index)
            self.http_requests += getattr(exc, "http_requests", 0)

    def note(
        self,
        agent: str,
        input_summary: str,
        output_summary: str,
        *,
        started: float | None = None,
        batch: int | None = None,
        call: tuple[LLMCall, int] | None = None,
        ok: bool = True,
        extra_ms: float = 0.0,
    ) -> None:
        if call is not None:
            duration, tokens, index = call[0].duration_ms, call[0].tokens, call[1]
        else:
            duration, tokens, index = (self.clock() - (started or self.clock())) * 1000.0 + extra_ms, None, None
        self.trace.append(
            TraceEntry(
                agent=agent,
                batch=batch,
                llm_call=index,
                tokens=tokens,
                duration_ms=round(duration, 3),
                input_summary=_short(input_summary),
                output_summary=_short(output_summary),
                ok=ok,
            )
        )

    def to_result(self, dialect: str, preview_rows: int) -> RunResult:
        result = self.result
        return RunResult(
            run_id=self.run_id,
            question=self.text,
            status=self.status or RunStatus.LLM_ERROR,
            answer=self.answer,
            sql=self.sql,
            row_count=result.row_count if result is not None else None,
            columns=list(result.columns) if result is not None else [],
            rows_preview=[list(r) for r in result.rows[:preview_rows]] if result is not None else [],
            truncated=bool(result.truncated) if result is not None else False,
            warnings=self.warnings,
            assumptions=self.assumptions,
            clarification_questions=self.clarification_questions,
            approvals=self.approvals,
            corrections=self.corrections,
            error=self.error,
            llm_calls=len(self.calls),
            http_requests=self.http_requests,
            tokens=self.tokens,
            dialect=dialect,
            duration_ms=round((self.clock() - self.started) * 1000.0, 3),
            trace=self.trace,
        )


class Pipeline:
    """Answers questions about one database, with every SQL statement approved before it runs.

    ``reviewer`` is an approvals strategy (``TerminalReviewer``, ``ApproveAll``, ...) asked ONCE
    per approval cycle for every statement waiting; ``progress`` receives a short stage name as
    the run moves on (for a spinner or progress bars).
    """

    def __init__(
        self,
        database: TargetDatabase,
        llm: LLMClient,
        reviewer: Any,
        *,
        config: PipelineConfig | None = None,
        approval_store: Any | None = None,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.db = database
        self.llm = llm
        self.reviewer = reviewer
        self.config = config or PipelineConfig()
        self.approval_store = approval_store
        self.progress: Progress = progress or (lambda stage, done=0, total=0: None)
        self.clock = clock

    # -- public API --------------------------------------------------------------------------------

    def ask(self, question: str) -> RunResult:
        """Answer one question (a batch of one)."""
        return self.run_batch([question])[0]

    def run_batch(
        self, questions: Sequence[str], *, on_result: Callable[[int, RunResult], None] | None = None
    ) -> list[RunResult]:
        """Answer many questions with batched LLM calls and ONE approval cycle per round.

        ``on_result(index, result)`` is called as soon as each question is finished (early for
        questions that stop early), so results can be streamed out before the batch ends.
        """
        run_id = "run_" + uuid.uuid4().hex[:16]
        calls_before = self.llm.calls
        qs = [_Question(run_id, f"q{i + 1}", text, self.clock) for i, text in enumerate(questions)]
        self._on_result = on_result
        self._emitted: set[str] = set()
        self._all = qs
        self._run(qs, run_id, calls_before)
        self._emit()
        return [q.to_result(self.db.dialect, self.config.preview_rows) for q in qs]

    def _emit(self) -> None:
        """Hand every newly finished question to ``on_result``."""
        if self._on_result is None:
            return
        for index, q in enumerate(self._all):
            if q.status is not None and q.qid not in self._emitted:
                self._emitted.add(q.qid)
                self._on_result(index, q.to_result(self.db.dialect, self.config.preview_rows))

    # -- the stages ---------------------------------------------------------------------------------

    def _run(self, qs: list[_Question], run_id: str, calls_before: int) -> None:
        self._calls_before = calls_before
        for q in qs:
            self._check_input(q)
        self._admit(qs)
        self._emit()
        try:
            self._reason([q for q in qs if q.active])
            self._emit()
            self._explore([q for q in qs if q.active])
            self._generate([q for q in qs if q.active and q.after_synthesis is None])
            self._emit()
            self._approve_and_execute(qs, run_id)
            self._emit()
            self._synthesize([q for q in qs if q.active and q.after_synthesis is not None])
        except RateLimitError as exc:  # exceeded, or a shared backend down: never unlimited
            for q in qs:
                q.finish(
                    RunStatus.RATE_LIMITED,
                    RunError(code=exc.code, message=str(exc), retry_after=getattr(exc, "retry_after", None)),
                )
        except ApprovalCancelled:
            for q in qs:
                q.finish(
                    RunStatus.CANCELLED,
                    RunError(code="approval_cancelled", message="the approval was cancelled; nothing ran"),
                )
        except (DatabaseError, SchemaInspectionError) as exc:
            for q in qs:
                q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))

    def _admit(self, qs: list[_Question]) -> None:
        """Admission control: the worst case is 5 requests per chunk of questions."""
        active = [q for q in qs if q.active]
        if not self.config.admission or not active or getattr(self.llm.limiter, "mode", "") != "fail_fast":
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
                    RunError(code="rate_limited", message=message, retry_after=None if wait == float("inf") else wait),
                )

    def _check_input(self, q: _Question) -> None:
        text = q.text.strip()
        if not text:
            q.finish(RunStatus.INVALID_INPUT, RunError(code="empty_question", message="the question is empty"))
        elif len(text) > self.config.max_question_chars:
            q.finish(
                RunStatus.INVALID_INPUT,
                RunError(
                    code="question_too_long",
                    message=f"the question has {len(text)} characters; the limit is "
                    f"{self.config.max_question_chars}",
                ),
            )

    def _reason(self, qs: list[_Question]) -> None:
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

    def _explore(self, qs: list[_Question]) -> None:
        if not qs:
            return
        all_tables = self.db.schema.tables()
        large = len(all_tables) > LARGE_SCHEMA_TABLES
        for done, q in enumerate(qs, start=1):
            self.progress("exploring schema", done - 1, len(qs))
            started = self.clock()
            planned = list(q.reasoning.plan.tables)
            if not planned or not self.db.schema.explore(planned, neighbours=False).tables:
                # Nothing usable planned: the whole schema if small, else the best-ranked tables.
                planned = rank_tables(q.text, all_tables, limit=DEFAULT_MAX_TABLES) if large else list(all_tables)
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
                q.note("DataExplorer", f"{len(filters)} filter column(s)", explored.summary(), started=started)

    def _generate(self, qs: list[_Question]) -> None:
        if not qs:
            return
        agent = SQLGenerator()

        def build(items: list[QuestionInput]) -> list[dict[str, str]]:
            chunk = [by_id[i.id] for i in items]
            return agent.build_messages(items, self._schema_text(chunk), _joined(q.data_context for q in chunk), self.db.dialect)

        by_id = {q.qid: q for q in qs}
        inputs = lambda q: QuestionInput(q.qid, q.text.strip(), SQLGenerator.question_context(q.reasoning))  # noqa: E731
        for q, draft, call in self._call("writing SQL", agent, qs, build, inputs):
            q.pending_sql = draft.sql
            q.note("SQLGenerator", q.text, draft.sql, batch=2, call=call)

    def _approve_and_execute(self, qs: list[_Question], run_id: str) -> None:
        """Approval cycles: validate, ONE review for everything waiting, run; correct; repeat."""
        validator = SqlValidator(
            dialect=self.db.dialect,
            policy=SafetyPolicy(max_limit=self.config.max_limit, star=self.config.star),
            schema={name: info.column_names() for name, info in self.db.schema.tables().items()},
        )
        gate = ApprovalGate(
            reviewer=self.reviewer, validate=validator.validate, store=self.approval_store, run_id=run_id
        )
        executor = SQLExecutor(self.db.engine, row_cap=self.config.row_cap)
        cycle = 0
        while True:
            waiting = [q for q in qs if q.active and q.pending_sql is not None]
            if not waiting:
                return
            cycle += 1
            runnable = self._review(waiting, validator, gate, cycle)
            self._execute(runnable, executor, gate)
            needing = [q for q in qs if q.active and q.correction_error is not None]
            if needing:
                self._correct(needing)

    def _review(
        self, qs: list[_Question], validator: SqlValidator, gate: ApprovalGate, cycle: int
    ) -> list[tuple[_Question, Any, str]]:
        items: dict[str, tuple[_Question, ApprovalItem, Any]] = {}
        for q in qs:
            sql, q.pending_sql = q.pending_sql, None
            started = self.clock()
            validation = validator.validate(sql)
            refusal = validation.refusal
            q.note(
                "SafetyValidator",
                sql,
                "accepted" + _rewrites(validation) if validation.ok else f"refused: {refusal.code}: {refusal.message}",
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
            items[item.call_id] = (q, item, validation)

        self.progress("waiting for approval", 0, len(items))
        try:
            outcome = gate.review([item for _, item, _ in items.values()])
        except DecisionError as exc:
            raise ApprovalCancelled(f"the decision was refused: {exc}") from exc

        runnable = []
        for call_id, (q, item, validation) in items.items():
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
            if not validation.ok:
                refusal = validation.refusal
                if refusal.code in CORRECTABLE_REFUSALS and q.corrections < self.config.max_corrections:
                    q.correction_error = f"{refusal.code}: {refusal.message}"
                    continue
                q.answer = f"sqlgate refused the generated SQL ({refusal.code}): {refusal.message} Nothing was run."
                q.finish(RunStatus.UNSAFE, RunError(code=refusal.code, message=refusal.message))
            elif status == "rejected":
                reason = resolution.reason or "no reason given"
                q.failure = f"a reviewer rejected it: {reason}"
                q.after_synthesis = RunStatus.REJECTED
                q.error = RunError(code="rejected_by_reviewer", message=reason)
            else:
                runnable.append((q, outcome, call_id))
        return runnable

    def _execute(self, runnable: list[tuple[_Question, Any, str]], executor: SQLExecutor, gate: ApprovalGate) -> None:
        if not runnable:
            return
        self.progress("running SQL", 0, len(runnable))
        finished = [0]

        def run_one(entry: tuple[_Question, Any, str]) -> tuple[_Question, Any, BaseException | None, float]:
            q, outcome, call_id = entry
            started = self.clock()
            try:
                with gate.ledger.executing(outcome, call_id) as sql:
                    q.sql = sql  # byte-for-byte what was approved (or edited)
                    return q, executor.run(sql), None, started
            except ExecutionError as exc:
                return q, None, exc, started
            finally:
                finished[0] += 1
                self.progress("running SQL", finished[0], len(runnable))

        if len(runnable) == 1:
            done = [run_one(runnable[0])]
        else:
            with ThreadPoolExecutor(max_workers=min(self.config.parallelism, len(runnable))) as pool:
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
            q.note("SQLExecutor", q.sql or "", f"{exc.code}: {exc.message}", started=started, ok=False)
            if exc.code == "database_unreachable":
                q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
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

    def _check_result(self, q: _Question) -> None:
        started = self.clock()
        q.warnings += ResultValidator().check(q.result)
        # Keep what the answer and the result object use, not every fetched row.
        q.result.rows = q.result.rows[: max(self.config.preview_rows, PREVIEW_ROWS)]
        q.note("ResultValidator", f"{q.result.row_count} row(s)", "; ".join(q.warnings) or "no warnings", started=started)
        q.after_synthesis = RunStatus.ANSWERED

    def _correct(self, qs: list[_Question]) -> None:
        agent = SelfCorrection()
        for q in qs:
            q.corrections += 1
        by_id = {q.qid: q for q in qs}

        def build(items: list[QuestionInput]) -> list[dict[str, str]]:
            return agent.build_messages(items, self._schema_text([by_id[i.id] for i in items]), self.db.dialect)

        def inputs(q: _Question) -> QuestionInput:
            return QuestionInput(
                q.qid, q.text.strip(), SelfCorrection.question_context(q.sql or "", q.correction_error or "", q.corrections)
            )

        for q, fix, call in self._call("correcting SQL", agent, qs, build, inputs):
            q.note("SelfCorrection", q.correction_error or "", fix.sql, batch=3, call=call)
            q.pending_sql = fix.sql
        for q in qs:
            q.correction_error = None

    def _synthesize(self, qs: list[_Question]) -> None:
        if not qs:
            return
        agent = ResponseSynthesizer()

        def outcome(q: _Question) -> str:
            if q.meta_outcome is not None:
                return q.meta_outcome
            if q.result is not None:
                return describe_result(q.sql or "", q.result.columns, q.result.rows, q.result.row_count)
            return describe_failure(q.sql, q.failure or "unknown failure")

        def inputs(q: _Question) -> QuestionInput:
            return QuestionInput(
                q.qid, q.text.strip(), ResponseSynthesizer.question_context(outcome(q), q.assumptions, q.warnings)
            )

        for q, answer, call in self._call("writing the answer", agent, qs, agent.build_messages, inputs):
            q.answer = answer.answer
            q.warnings += [c for c in answer.caveats if c not in q.warnings]
            q.note("ResponseSynthesizer", outcome(q), answer.answer, batch=4, call=call)
            q.finish(q.after_synthesis or RunStatus.ANSWERED, q.error)
            self._emit()

    # -- batched LLM calls --------------------------------------------------------------------------

    def _call(
        self,
        stage: str,
        agent: LLMAgent[Any],
        qs: list[_Question],
        build: Callable[[list[QuestionInput]], list[dict[str, str]]],
        inputs: Callable[[_Question], QuestionInput],
    ) -> Iterable[tuple[_Question, Any, tuple[LLMCall, int]]]:
        """Call ``agent`` for ``qs`` in chunks; yield each question with its part of a reply.

        A question the reply leaves out, answers twice or that a failed call carried is retried
        alone; a question that fails alone ends with ``llm_error`` and never fails the others.
        """
        prepared = {q.qid: inputs(q) for q in qs}
        done = 0
        self.progress(stage, 0, len(qs))
        for chunk in self._chunks(qs, prepared):
            yield from self._call_chunk(agent, chunk, build, prepared)
            done += len(chunk)
            self.progress(stage, done, len(qs))

    def _call_chunk(
        self,
        agent: LLMAgent[Any],
        chunk: list[_Question],
        build: Callable[[list[QuestionInput]], list[dict[str, str]]],
        prepared: dict[str, QuestionInput],
    ) -> Iterable[tuple[_Question, Any, tuple[LLMCall, int]]]:
        try:
            reply, call = self.llm.call(agent, build([prepared[q.qid] for q in chunk]))
        except LLMError as exc:
            for q in chunk:
                q.took_part_in_failed(exc)
            if len(chunk) > 1:
                for q in chunk:
                    yield from self._call_chunk(agent, [q], build, prepared)
                return
            chunk[0].finish(RunStatus.LLM_ERROR, RunError(code=exc.code, message=redact(exc.message)))
            return
        index = call.index - self._calls_before
        for q in chunk:
            q.took_part(call, index, len(chunk))
        split = split_results(list(reply.results), [q.qid for q in chunk])
        if len(chunk) == 1 and not split.by_id and len(reply.results) == 1:
            split.by_id[chunk[0].qid] = reply.results[0]  # one question, one answer: the id is a formality
            split.missing = []
        for q in chunk:
            if q.qid in split.by_id:
                yield q, split.by_id[q.qid], (call, index)
            elif len(chunk) > 1:
                yield from self._call_chunk(agent, [q], build, prepared)
            else:
                q.finish(
                    RunStatus.LLM_ERROR,
                    RunError(code="invalid_model_output", message="the model's reply did not answer this question"),
                )

    def _chunks(self, qs: list[_Question], prepared: dict[str, QuestionInput]) -> Iterable[list[_Question]]:
        """Up to ``k`` questions per call, fewer when their contexts would make the prompt too big."""
        chunk: list[_Question] = []
        size = 0
        for q in qs:
            item = prepared[q.qid]
            cost = len(item.question) + len(item.context) + 40
            if chunk and (len(chunk) >= self.config.k or size + cost > self.config.max_prompt_chars):
                yield chunk
                chunk, size = [], 0
            chunk.append(q)
            size += cost
        if chunk:
            yield chunk

    def _schema_text(self, qs: list[_Question]) -> str:
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
            ClarifyingQuestionOut(id="c1", text="Could you restate the question naming the measure and the data you mean?")
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


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _rewrites(validation: Any) -> str:
    rewrites = [f.code for f in validation.findings if getattr(f, "severity", "") == "rewrite"]
    return f" (rewrites: {', '.join(rewrites)})" if rewrites else ""


__all__ = ["CORRECTABLE_REFUSALS", "LARGE_SCHEMA_TABLES", "Pipeline", "PipelineConfig"]
