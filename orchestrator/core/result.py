"""What a run returns: a JSON-serialisable result with the answer, the SQL and the trace."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.core.llm import TokenUsage


class RunStatus(str, Enum):  # noqa: UP042 - str() of a member is its qualified name, as before
    """Every way a run can end. Each maps to a distinct CLI exit code (see ``EXIT_CODES``)."""

    ANSWERED = "answered"
    NEEDS_CLARIFICATION = "needs_clarification"
    REJECTED = "rejected"  # a reviewer rejected the SQL
    UNSAFE = "unsafe"  # the validator refused the model's SQL
    EXECUTION_FAILED = "execution_failed"  # still failing after the allowed corrections
    TIMED_OUT = "timed_out"  # the statement timeout fired
    RATE_LIMITED = "rate_limited"
    LLM_ERROR = "llm_error"
    DATABASE_ERROR = "database_error"
    INVALID_INPUT = "invalid_input"
    CANCELLED = "cancelled"  # the reviewer interrupted the approval prompt
    AWAITING_APPROVAL = "awaiting_approval"  # paused at the gate; resume after the decision
    EXECUTION_IN_DOUBT = "execution_in_doubt"  # it may have run (its process stopped): not re-run


EXIT_CODES: dict[RunStatus, int] = {
    RunStatus.ANSWERED: 0,
    RunStatus.INVALID_INPUT: 2,
    RunStatus.NEEDS_CLARIFICATION: 3,
    RunStatus.REJECTED: 4,
    RunStatus.UNSAFE: 5,
    RunStatus.EXECUTION_FAILED: 6,
    RunStatus.TIMED_OUT: 7,
    RunStatus.RATE_LIMITED: 8,
    RunStatus.LLM_ERROR: 9,
    RunStatus.DATABASE_ERROR: 10,
    RunStatus.AWAITING_APPROVAL: 11,
    RunStatus.EXECUTION_IN_DOUBT: 12,
    RunStatus.CANCELLED: 130,
}


#: ``sqlgate batch``'s exit status when at least one question of the results file ended other
#: than answered or needs_clarification (the file says which, and why).
BATCH_INCOMPLETE_EXIT = 13
#: ``sqlgate resume RUN --db URL`` when the run belongs to another database (nothing ran).
WRONG_DATABASE_EXIT = 14
#: The statuses a batch counts as done well: exit 0 only when every question ended in one.
BATCH_OK_STATUSES = frozenset({RunStatus.ANSWERED, RunStatus.NEEDS_CLARIFICATION})


class TraceEntry(BaseModel):
    """One agent that ran. The four Batch-1 agents share one LLM call (same ``llm_call``)."""

    agent: str
    batch: int | None = Field(description="LLM batch number 1-4, or None for deterministic agents")
    llm_call: int | None = Field(default=None, description="index of the LLM call in this run")
    tokens: TokenUsage | None = None
    duration_ms: float
    input_summary: str
    output_summary: str
    ok: bool = True


class ClarifyingQuestionOut(BaseModel):
    id: str
    text: str


class ApprovalRecord(BaseModel):
    """How the gate resolved one statement in one cycle."""

    cycle: int
    batch_id: str
    call_id: str
    status: str
    sql: str | None
    reason: str | None = None


class RunError(BaseModel):
    code: str
    message: str
    retry_after: float | None = None


class RunResult(BaseModel):
    run_id: str
    question: str
    status: RunStatus
    answer: str | None = None
    sql: str | None = None
    row_count: int | None = None
    columns: list[str] = Field(default_factory=list)
    rows_preview: list[list[Any]] = Field(default_factory=list)
    truncated: bool = False
    warnings: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    clarification_questions: list[ClarifyingQuestionOut] = Field(default_factory=list)
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    corrections: int = 0
    error: RunError | None = None
    llm_calls: int = 0
    http_requests: int = 0
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    dialect: str | None = None
    duration_ms: float = 0.0
    trace: list[TraceEntry] = Field(default_factory=list)
    follow_up_of: str | None = Field(
        default=None,
        description="The run whose clarifying questions this run's question answers, if any",
    )
    hint: str | None = Field(
        default=None,
        description="What the asker added to the question (--hint, MCP evidence), if anything; "
        "a follow-up of this question is planned with it too",
    )

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def agents_ran(self) -> list[str]:
        return [t.agent for t in self.trace]
