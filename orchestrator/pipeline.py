"""The pipeline for one question, step by step as the design's table gives it.

    Batch 1 (reasoning) -> SchemaExplorer -> DataExplorer? -> [META: Batch 4]
    -> Batch 2 (SQL) -> SafetyValidator -> approval gate -> SQLExecutor
    -> [error: Batch 3, re-validate, re-approve; at most twice] -> ResultValidator -> Batch 4

Call budget: simple data question 3, meta question 2, one correction 4, two corrections 5,
unresolved ambiguity 1.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from agents import (
    DEFAULT_MAX_TABLES,
    DataExplorer,
    ExecutionError,
    Intent,
    ReasoningAgent,
    ReasoningOutput,
    ResponseSynthesizer,
    ResultValidator,
    SchemaContext,
    SelfCorrection,
    SQLExecutor,
    SQLGenerator,
    compact_catalogue,
    rank_tables,
)
from agents.response_synthesizer import describe_failure, describe_result, describe_schema
from approvals import ApprovalCancelled, ApprovalGate, ApprovalItem
from orchestrator.database import TargetDatabase
from orchestrator.errors import DatabaseError, LLMError
from orchestrator.llm import LLMCall, LLMClient, TokenUsage, redact
from orchestrator.result import (
    ApprovalRecord,
    ClarifyingQuestionOut,
    RunError,
    RunResult,
    RunStatus,
    TraceEntry,
)
from ratelimit import RateLimitExceeded
from safety import SafetyPolicy, SqlValidator

#: Validator refusals a model can fix by rewriting (the others are attacks: they are not retried).
CORRECTABLE_REFUSALS = frozenset({"select_star", "parse_error", "unknown_table", "unknown_column"})

Progress = Callable[[str], None]

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


class _Stop(Exception):
    """Ends a run early with a status (and, for failures, an error)."""

    def __init__(self, status: RunStatus, error: RunError | None = None) -> None:
        super().__init__(status.value)
        self.status = status
        self.error = error


class Pipeline:
    """Answers questions about one database, with every SQL statement approved before it runs.

    ``reviewer`` is an approvals strategy (``TerminalReviewer``, ``ApproveAll``, ...); ``progress``
    receives a short stage name as the run moves on (for a spinner).
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
        self.progress = progress or (lambda stage: None)
        self.clock = clock

    def ask(self, question: str) -> RunResult:
        run = _Run(self, question)
        try:
            self._run(run)
        except _Stop as stop:
            run.status, run.error = stop.status, stop.error
        except RateLimitExceeded as exc:
            run.status = RunStatus.RATE_LIMITED
            run.error = RunError(code="rate_limited", message=str(exc), retry_after=exc.retry_after)
        except ApprovalCancelled:
            run.status = RunStatus.CANCELLED
            run.error = RunError(code="approval_cancelled", message="the approval was cancelled; nothing ran")
        except LLMError as exc:
            run.status = RunStatus.LLM_ERROR
            run.error = RunError(code=exc.code, message=redact(exc.message))
        except DatabaseError as exc:
            run.status = RunStatus.DATABASE_ERROR
            run.error = RunError(code=exc.code, message=exc.message)
        return run.result()

    # -- the steps ---------------------------------------------------------------------------------

    def _run(self, run: _Run) -> None:
        question = run.question.strip()
        if not question:
            raise _Stop(RunStatus.INVALID_INPUT, RunError(code="empty_question", message="the question is empty"))
        if len(question) > self.config.max_question_chars:
            raise _Stop(
                RunStatus.INVALID_INPUT,
                RunError(
                    code="question_too_long",
                    message=f"the question has {len(question)} characters; the limit is "
                    f"{self.config.max_question_chars}",
                ),
            )

        self.progress("reasoning")
        started = self.clock()
        all_tables = self.db.schema.tables()
        large = len(all_tables) > LARGE_SCHEMA_TABLES
        catalogue = compact_catalogue(question, all_tables, always_include_all_below=LARGE_SCHEMA_TABLES)
        catalogue_ms = (self.clock() - started) * 1000.0
        agent = ReasoningAgent()
        reasoning, call = self.llm.call(agent, agent.build_messages(question, catalogue, self.db.dialect))
        run.trace_reasoning(question, reasoning, call)
        run.assumptions = list(reasoning.clarification.assumptions)

        if not reasoning.clarification.resolved:
            run.clarification_questions = _unique_questions(reasoning)
            raise _Stop(RunStatus.NEEDS_CLARIFICATION)

        self.progress("exploring schema")
        started = self.clock()
        tables = list(reasoning.plan.tables)
        if not tables or not self.db.schema.explore(tables, neighbours=False).tables:
            # Nothing usable planned: the whole schema if small, else the best-ranked tables.
            tables = rank_tables(question, all_tables, limit=DEFAULT_MAX_TABLES) if large else list(all_tables)
        schema = self.db.schema.explore(tables, incoming=not large)
        run.trace(
            "SchemaExplorer",
            None,
            started,
            f"planned tables: {', '.join(tables) or '-'}",
            schema.summary(),
            extra_ms=catalogue_ms,
        )

        if reasoning.intent.intent == Intent.META_QUERY:
            self._synthesize(run, question, describe_schema(schema.render()))
            run.status = RunStatus.ANSWERED
            return

        data_context = ""
        filters = [(f.table, f.column) for f in reasoning.plan.filters]
        if reasoning.plan.needs_data_context and filters:
            self.progress("sampling data")
            started = self.clock()
            explored = DataExplorer(self.db.engine).explore(filters, schema=schema)
            data_context = explored.render()
            run.trace("DataExplorer", None, started, f"{len(filters)} filter column(s)", explored.summary())

        self.progress("writing SQL")
        generator = SQLGenerator()
        draft, call = self.llm.call(
            generator,
            generator.build_messages(question, reasoning, schema.render(), data_context, self.db.dialect),
        )
        run.trace("SQLGenerator", 2, call, question, _short(draft.sql), llm=call)

        result = self._validate_approve_execute(run, question, draft.sql, schema)

        started = self.clock()
        run.warnings += ResultValidator().check(result)
        run.trace(
            "ResultValidator",
            None,
            started,
            f"{result.row_count} row(s)",
            "; ".join(run.warnings) or "no warnings",
        )
        run.absorb(result, self.config.preview_rows)
        self._synthesize(
            run,
            question,
            describe_result(run.sql or "", result.columns, result.rows, result.row_count),
        )
        run.status = RunStatus.ANSWERED

    def _validate_approve_execute(self, run: _Run, question: str, sql: str, schema: SchemaContext) -> Any:
        """Validate, approve and run ``sql``; on failure correct it (at most twice) and go again."""
        validator = SqlValidator(
            dialect=self.db.dialect,
            policy=SafetyPolicy(max_limit=self.config.max_limit, star=self.config.star),
            schema=schema.columns_by_table(),
        )
        gate = ApprovalGate(reviewer=self.reviewer, validate=validator.validate, store=self.approval_store)
        executor = SQLExecutor(self.db.engine, row_cap=self.config.row_cap)
        cycle = 0
        while True:
            cycle += 1
            started = self.clock()
            validation = validator.validate(sql)
            refusal = validation.refusal
            run.trace(
                "SafetyValidator",
                None,
                started,
                _short(sql),
                "accepted" + _rewrites(validation) if validation.ok else f"refused: {refusal.code}",
                ok=validation.ok,
            )
            run.sql = validation.sql if validation.ok else sql

            self.progress("waiting for approval")
            item = ApprovalItem.new(
                question_id=run.run_id,
                question=question,
                sql=validation.sql if validation.ok else sql,
                findings=list(validation.findings),
                refused=not validation.ok,
                cycle=cycle,
            )
            outcome = gate.review([item])
            resolution = outcome.resolutions[item.call_id]
            run.approvals.append(
                ApprovalRecord(
                    cycle=cycle,
                    batch_id=outcome.batch_id,
                    call_id=item.call_id,
                    status=str(getattr(resolution.status, "value", resolution.status)),
                    sql=resolution.sql,
                    reason=resolution.reason,
                )
            )

            if not validation.ok:
                if refusal.code in CORRECTABLE_REFUSALS and run.corrections < self.config.max_corrections:
                    sql = self._correct(run, question, sql, f"{refusal.code}: {refusal.message}", schema)
                    continue
                run.answer = (
                    f"sqlgate refused the generated SQL ({refusal.code}): {refusal.message} "
                    "Nothing was run."
                )
                raise _Stop(RunStatus.UNSAFE, RunError(code=refusal.code, message=refusal.message))

            status = str(getattr(resolution.status, "value", resolution.status))
            if status == "rejected":
                reason = resolution.reason or "no reason given"
                self._synthesize(run, question, describe_failure(run.sql, f"a reviewer rejected it: {reason}"))
                raise _Stop(RunStatus.REJECTED, RunError(code="rejected_by_reviewer", message=reason))

            to_run = outcome.runnable(item.call_id)
            run.sql = to_run
            self.progress("running SQL")
            started = self.clock()
            try:
                result = executor.run(to_run)
            except ExecutionError as exc:
                run.trace("SQLExecutor", None, started, _short(to_run), _short(f"{exc.code}: {exc.message}"), ok=False)
                if exc.code == "database_unreachable":
                    raise _Stop(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message)) from exc
                if exc.timed_out:
                    self._synthesize(run, question, describe_failure(to_run, f"statement timeout: {exc.message}"))
                    raise _Stop(RunStatus.TIMED_OUT, RunError(code=exc.code, message=exc.message)) from exc
                if run.corrections < self.config.max_corrections:
                    sql = self._correct(run, question, to_run, exc.message, schema)
                    continue
                self._synthesize(run, question, describe_failure(to_run, exc.message))
                raise _Stop(RunStatus.EXECUTION_FAILED, RunError(code=exc.code, message=exc.message)) from exc
            run.trace(
                "SQLExecutor",
                None,
                started,
                _short(to_run),
                f"{result.row_count} row(s)" + (" (row cap hit)" if result.truncated else ""),
            )
            return result

    def _correct(self, run: _Run, question: str, sql: str, error: str, schema: SchemaContext) -> str:
        run.corrections += 1
        self.progress(f"correcting SQL ({run.corrections})")
        agent = SelfCorrection()
        fix, call = self.llm.call(
            agent,
            agent.build_messages(question, sql, error, schema.render(), self.db.dialect, run.corrections),
        )
        run.trace("SelfCorrection", 3, call, _short(error), _short(fix.sql), llm=call)
        return fix.sql

    def _synthesize(self, run: _Run, question: str, outcome: str) -> None:
        self.progress("writing the answer")
        agent = ResponseSynthesizer()
        answer, call = self.llm.call(
            agent, agent.build_messages(question, outcome, run.assumptions, run.warnings)
        )
        run.answer = answer.answer
        run.warnings += [c for c in answer.caveats if c not in run.warnings]
        run.trace("ResponseSynthesizer", 4, call, _short(outcome), _short(answer.answer), llm=call)


class _Run:
    """The mutable state of one run, turned into a ``RunResult`` at the end."""

    def __init__(self, pipeline: Pipeline, question: str) -> None:
        self.pipeline = pipeline
        self.clock = pipeline.clock
        self.started = self.clock()
        self.calls_before = pipeline.llm.calls
        self.requests_before = pipeline.llm.http_requests
        self.run_id = "run_" + uuid.uuid4().hex[:16]
        self.question = question
        self.status = RunStatus.LLM_ERROR
        self.error: RunError | None = None
        self.answer: str | None = None
        self.sql: str | None = None
        self.assumptions: list[str] = []
        self.warnings: list[str] = []
        self.clarification_questions: list[ClarifyingQuestionOut] = []
        self.approvals: list[ApprovalRecord] = []
        self.corrections = 0
        self.tokens = TokenUsage()
        self.entries: list[TraceEntry] = []
        self.columns: list[str] = []
        self.rows: list[list[Any]] = []
        self.row_count: int | None = None
        self.truncated = False

    def trace(
        self,
        agent: str,
        batch: int | None,
        started: float | LLMCall,
        input_summary: str,
        output_summary: str,
        *,
        llm: LLMCall | None = None,
        ok: bool = True,
        extra_ms: float = 0.0,
    ) -> None:
        if llm is not None:
            duration = llm.duration_ms
            self.tokens = self.tokens + llm.tokens
        else:
            duration = (self.clock() - started) * 1000.0 + extra_ms  # type: ignore[operator]
        self.entries.append(
            TraceEntry(
                agent=agent,
                batch=batch,
                llm_call=llm.index - self.calls_before if llm else None,
                tokens=llm.tokens if llm else None,
                duration_ms=round(duration, 3),
                input_summary=input_summary,
                output_summary=output_summary,
                ok=ok,
            )
        )

    def trace_reasoning(self, question: str, reasoning: ReasoningOutput, call: LLMCall) -> None:
        self.tokens = self.tokens + call.tokens
        c = reasoning.clarification
        outputs = {
            "IntentAnalyzer": f"{reasoning.intent.intent.value} ({reasoning.intent.confidence:.2f})",
            "ClarificationAgent": (
                f"resolved, {len(c.assumptions)} assumption(s)"
                if c.resolved
                else f"unresolved, {len(c.questions)} question(s)"
            ),
            "QueryDecomposer": f"{reasoning.decomposition.complexity}, {len(reasoning.decomposition.steps)} step(s)",
            "QueryPlanner": f"tables: {', '.join(reasoning.plan.tables) or '-'}; "
            f"data context: {'yes' if reasoning.plan.needs_data_context else 'no'}",
        }
        for agent in ReasoningAgent.agents:
            self.entries.append(
                TraceEntry(
                    agent=agent,
                    batch=1,
                    llm_call=call.index - self.calls_before,
                    tokens=call.tokens,
                    duration_ms=round(call.duration_ms, 3),
                    input_summary=_short(question),
                    output_summary=outputs[agent],
                )
            )

    def absorb(self, result: Any, preview_rows: int) -> None:
        self.columns = list(result.columns)
        self.rows = [list(r) for r in result.rows[:preview_rows]]
        self.row_count = result.row_count
        self.truncated = bool(result.truncated)

    def result(self) -> RunResult:
        llm = self.pipeline.llm
        return RunResult(
            run_id=self.run_id,
            question=self.question,
            status=self.status,
            answer=self.answer,
            sql=self.sql,
            row_count=self.row_count,
            columns=self.columns,
            rows_preview=self.rows,
            truncated=self.truncated,
            warnings=self.warnings,
            assumptions=self.assumptions,
            clarification_questions=self.clarification_questions,
            approvals=self.approvals,
            corrections=self.corrections,
            error=self.error,
            llm_calls=llm.calls - self.calls_before,
            http_requests=llm.http_requests - self.requests_before,
            tokens=self.tokens,
            dialect=self.pipeline.db.dialect,
            duration_ms=round((self.clock() - self.started) * 1000.0, 3),
            trace=self.entries,
        )


def _unique_questions(reasoning: ReasoningOutput) -> list[ClarifyingQuestionOut]:
    """The clarifying questions with ids unique within the run (models repeat ids)."""
    questions = reasoning.clarification.questions
    if not questions:
        return [
            ClarifyingQuestionOut(
                id="c1", text="Could you restate the question naming the measure and the data you mean?"
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


def _short(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _rewrites(validation: Any) -> str:
    rewrites = [f.code for f in validation.findings if getattr(f, "severity", "") == "rewrite"]
    return f" (rewrites: {', '.join(rewrites)})" if rewrites else ""


__all__ = ["CORRECTABLE_REFUSALS", "LARGE_SCHEMA_TABLES", "Pipeline", "PipelineConfig"]
