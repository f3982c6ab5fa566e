"""One question's state as it moves through the pipeline, and how it is checkpointed.

``QuestionState`` carries everything a question has gathered (reasoning, explored schema, SQL,
approvals, result, trace, cost); ``to_checkpoint``/``from_checkpoint`` turn it into the typed
checkpoint and back, so a run paused at the approval gate can be finished by another process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents import SchemaContext
from approvals import ApprovalItem
from orchestrator.core.checkpoint import QuestionCheckpoint
from orchestrator.core.errors import LLMError
from orchestrator.core.llm import LLMCall, TokenUsage, redact
from orchestrator.core.result import (
    ApprovalRecord,
    ClarifyingQuestionOut,
    RunError,
    RunResult,
    RunStatus,
    TraceEntry,
)

if TYPE_CHECKING:
    from agents.llm_agent import LLMAgent
    from safety import ValidationResult


class PendingStatement:
    """One statement in an approval cycle, with the validator's verdict on it."""

    def __init__(
        self,
        q: QuestionState,
        item: ApprovalItem | None,
        ok: bool,
        code: str | None,
        message: str | None,
        validation: ValidationResult | None = None,
    ):
        self.q, self.item, self.ok, self.code, self.message = q, item, ok, code, message
        #: The validator's result for ``item``'s SQL, carried to the gate (validated once).
        self.validation = validation


class PausedAtGate(Exception):
    """The gate has no reviewer in this process: the run waits for a decision in the store."""

    def __init__(self, batch_id: str, cycle: int, pending: dict[str, PendingStatement]) -> None:
        super().__init__(batch_id)
        self.batch_id, self.cycle, self.pending = batch_id, cycle, pending


class QuestionState:
    """One question's state as it moves through the stages."""

    def __init__(self, run_id: str, qid: str, text: str, clock: Callable[[], float]) -> None:
        self.run_id = run_id
        self.qid = qid
        self.text = text
        self.hint = ""  # what the asker added (``--hint``, a batch file's hint): ranked with it
        self.clock = clock
        self.started = clock()
        self.status: RunStatus | None = None  # set once the question is finished
        self.error: RunError | None = None
        self.reasoning: Any = None
        self.schema: SchemaContext | None = None
        self.data_context = ""
        self.pending_sql: str | None = None  # SQL waiting for the next approval cycle
        self.agent_sql = False  # the caller wrote the SQL: no model call plans, fixes or answers
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

    def to_checkpoint(self) -> QuestionCheckpoint:
        """Everything needed to carry on in another process."""
        return QuestionCheckpoint(
            qid=self.qid,
            text=self.text,
            hint=self.hint,
            status=self.status,
            after_synthesis=self.after_synthesis,
            error=self.error,
            reasoning=self.reasoning,
            db_schema=self.schema,
            data_context=self.data_context,
            pending_sql=self.pending_sql,
            agent_sql=self.agent_sql,
            sql=self.sql,
            failure=self.failure,
            correction_error=self.correction_error,
            meta_outcome=self.meta_outcome,
            corrections=self.corrections,
            result=self.result,
            answer=self.answer,
            assumptions=list(self.assumptions),
            warnings=list(self.warnings),
            clarification_questions=list(self.clarification_questions),
            approvals=list(self.approvals),
            trace=list(self.trace),
            tokens=self.tokens,
            calls=sorted(self.calls),
            http_requests=self.http_requests,
        )

    @classmethod
    def from_checkpoint(
        cls, run_id: str, saved: QuestionCheckpoint, clock: Callable[[], float]
    ) -> QuestionState:
        q = cls(run_id, saved.qid, saved.text, clock)
        q.hint = saved.hint
        q.status, q.after_synthesis, q.error = saved.status, saved.after_synthesis, saved.error
        q.reasoning, q.schema, q.data_context = saved.reasoning, saved.db_schema, saved.data_context
        q.pending_sql, q.sql, q.failure = saved.pending_sql, saved.sql, saved.failure
        q.agent_sql = saved.agent_sql
        q.correction_error, q.meta_outcome = saved.correction_error, saved.meta_outcome
        q.corrections, q.result, q.answer = saved.corrections, saved.result, saved.answer
        q.assumptions, q.warnings = list(saved.assumptions), list(saved.warnings)
        q.clarification_questions = list(saved.clarification_questions)
        q.approvals, q.trace = list(saved.approvals), list(saved.trace)
        q.tokens, q.calls, q.http_requests = saved.tokens, set(saved.calls), saved.http_requests
        return q

    def release(self) -> None:
        """Drop what only an unfinished question needs (after its result was handed out)."""
        self.reasoning = self.schema = self.result = None
        self.data_context = ""
        self.trace, self.approvals = [], []

    def finish(self, status: RunStatus, error: RunError | None = None) -> None:
        if self.status is None:
            self.status, self.error = status, error

    def took_part(self, call: LLMCall, call_index: int, shared_by: int, position: int = 0) -> None:
        """This question was one of ``shared_by`` in call ``call_index`` (at ``position``): it
        is charged its share of the call's requests and tokens, so the shares of a call's
        questions add up to what the call cost, never to that times the questions."""
        if call_index not in self.calls:
            self.calls.add(call_index)
            self.http_requests += share(call.http_requests, shared_by, position)
            self.tokens = self.tokens + TokenUsage(
                prompt=share(call.tokens.prompt, shared_by, position),
                completion=share(call.tokens.completion, shared_by, position),
            )

    def took_part_in_failed(
        self, exc: LLMError, agent: LLMAgent[Any], shared_by: int = 1, position: int = 0
    ) -> None:
        """A call that ended in an error still cost requests and the tokens of the replies the
        server sent: charge this question its share, and note the failed call in its trace."""
        index = exc.call_index
        if index is None or index in self.calls:
            return
        self.calls.add(index)
        self.http_requests += share(exc.http_requests, shared_by, position)
        tokens = TokenUsage(
            prompt=share(exc.prompt_tokens, shared_by, position),
            completion=share(exc.completion_tokens, shared_by, position),
        )
        self.tokens = self.tokens + tokens
        self.trace_failed_call(
            agent, index, tokens, exc.duration_ms, shared_by, f"{exc.code}: {redact(exc.message)}"
        )

    def trace_failed_call(
        self,
        agent: LLMAgent[Any],
        index: int,
        tokens: TokenUsage,
        duration_ms: float,
        shared_by: int,
        outcome: str,
    ) -> None:
        """A trace entry (``ok: false``) per logical agent of a call that gave this question
        nothing: failed, or answered other questions only."""
        for name in agent.agents:
            self.trace.append(
                TraceEntry(
                    agent=name,
                    batch=agent.batch,
                    llm_call=index,
                    tokens=tokens,
                    duration_ms=round(duration_ms, 3),
                    input_summary=short(f"{shared_by} question(s) in the call"),
                    output_summary=short(outcome),
                    ok=False,
                )
            )

    def fail_call(self, exc: LLMError) -> None:
        """The question's LLM call failed for good. A question whose outcome is known (rejected,
        failed, timed out) keeps it, with a warning that its answer could not be written: the
        outcome is what the person must see. Any other ends ``llm_error``."""
        message = redact(exc.message)
        if self.after_synthesis not in (None, RunStatus.ANSWERED):
            self.warnings.append(f"the answer could not be written ({exc.code}: {message})")
            self.finish(self.after_synthesis, self.error)
            return
        self.finish(RunStatus.LLM_ERROR, RunError(code=exc.code, message=message))

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
            duration, tokens, index = (
                (self.clock() - (started or self.clock())) * 1000.0 + extra_ms,
                None,
                None,
            )
        self.trace.append(
            TraceEntry(
                agent=agent,
                batch=batch,
                llm_call=index,
                tokens=tokens,
                duration_ms=round(duration, 3),
                input_summary=short(input_summary),
                output_summary=short(output_summary),
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
            rows_preview=[list(r) for r in result.rows[:preview_rows]]
            if result is not None
            else [],
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
            hint=self.hint or None,
        )


def share(total: int, shared_by: int, position: int) -> int:
    """The part of ``total`` charged to the question at ``position`` of ``shared_by``: equal
    parts, the remainder one each to the first, so the parts add up to ``total``.

    Example:
        >>> [share(3, 2, i) for i in range(2)], [share(1, 3, i) for i in range(3)]
        ([2, 1], [1, 0, 0])
    """
    if shared_by <= 1:
        return total
    return total // shared_by + (1 if position < total % shared_by else 0)


def short(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


__all__ = ["PausedAtGate", "PendingStatement", "QuestionState"]
