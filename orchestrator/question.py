"""One question's state as it moves through the pipeline, and how it is checkpointed.

``QuestionState`` carries everything a question has gathered (reasoning, explored schema, SQL,
approvals, result, trace, cost); ``to_state``/``from_state`` turn it into JSON and back so a run
paused at the approval gate can be finished by another process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents import ExecutionResult, ReasoningOutput, SchemaContext
from approvals import ApprovalItem
from orchestrator.errors import LLMError
from orchestrator.llm import LLMCall, TokenUsage
from orchestrator.result import (
    ApprovalRecord,
    ClarifyingQuestionOut,
    RunError,
    RunResult,
    RunStatus,
    TraceEntry,
)


class PendingStatement:
    """One statement in an approval cycle, with the validator's verdict on it."""

    def __init__(
        self,
        q: QuestionState,
        item: ApprovalItem | None,
        ok: bool,
        code: str | None,
        message: str | None,
    ):
        self.q, self.item, self.ok, self.code, self.message = q, item, ok, code, message


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

    _PLAIN = (
        "qid",
        "text",
        "data_context",
        "pending_sql",
        "sql",
        "failure",
        "correction_error",
        "meta_outcome",
        "corrections",
        "answer",
        "assumptions",
        "warnings",
        "http_requests",
    )

    def to_state(self) -> dict[str, Any]:
        """Everything needed to carry on in another process, as JSON-able data."""
        state = {name: getattr(self, name) for name in self._PLAIN}
        state.update(
            status=self.status.value if self.status else None,
            after_synthesis=self.after_synthesis.value if self.after_synthesis else None,
            error=self.error.model_dump(mode="json") if self.error else None,
            reasoning=self.reasoning.model_dump(mode="json")
            if self.reasoning is not None
            else None,
            schema=self.schema.model_dump(mode="json") if self.schema is not None else None,
            result=self.result.model_dump(mode="json") if self.result is not None else None,
            clarification_questions=[
                c.model_dump(mode="json") for c in self.clarification_questions
            ],
            approvals=[a.model_dump(mode="json") for a in self.approvals],
            trace=[t.model_dump(mode="json") for t in self.trace],
            tokens=self.tokens.model_dump(mode="json"),
            calls=sorted(self.calls),
        )
        return state

    @classmethod
    def from_state(
        cls, run_id: str, state: dict[str, Any], clock: Callable[[], float]
    ) -> QuestionState:
        q = cls(run_id, state["qid"], state["text"], clock)
        for name in cls._PLAIN:
            setattr(q, name, state[name])
        q.status = RunStatus(state["status"]) if state["status"] else None
        q.after_synthesis = (
            RunStatus(state["after_synthesis"]) if state["after_synthesis"] else None
        )
        q.error = RunError.model_validate(state["error"]) if state["error"] else None
        q.reasoning = (
            ReasoningOutput.model_validate(state["reasoning"]) if state["reasoning"] else None
        )
        q.schema = SchemaContext.model_validate(state["schema"]) if state["schema"] else None
        q.result = ExecutionResult.model_validate(state["result"]) if state["result"] else None
        q.clarification_questions = [
            ClarifyingQuestionOut.model_validate(c) for c in state["clarification_questions"]
        ]
        q.approvals = [ApprovalRecord.model_validate(a) for a in state["approvals"]]
        q.trace = [TraceEntry.model_validate(t) for t in state["trace"]]
        q.tokens = TokenUsage.model_validate(state["tokens"])
        q.calls = set(state["calls"])
        return q

    def release(self) -> None:
        """Drop what only an unfinished question needs (after its result was handed out)."""
        self.reasoning = self.schema = self.result = None
        self.data_context = ""
        self.trace, self.approvals = [], []

    def finish(self, status: RunStatus, error: RunError | None = None) -> None:
        if self.status is None:
            self.status, self.error = status, error

    def took_part(self, call: LLMCall, call_index: int, shared_by: int) -> None:
        if call_index not in self.calls:
            self.calls.add(call_index)
            self.http_requests += call.http_requests
            self.tokens = self.tokens + TokenUsage(
                prompt=call.tokens.prompt // shared_by,
                completion=call.tokens.completion // shared_by,
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
        )


def short(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


__all__ = ["PausedAtGate", "PendingStatement", "QuestionState"]
