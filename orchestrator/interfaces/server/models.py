"""The HTTP API's request and response bodies, as published in ``/openapi.json``.

Requests are strict (``extra="forbid"`` where a smuggled field would matter: the actor always comes
from the token). Errors share one shape, ``{"error": {"code", "message", ...}}``, built in
``orchestrator.interfaces.server.error_handlers``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from approvals import StatementRisk
from orchestrator.core.pipeline_config import MAX_QUESTION_CHARS
from orchestrator.core.server_state import RunRow
from orchestrator.features.clarify import MAX_ANSWER_CHARS
from orchestrator.interfaces.server.sql_view import DiffLine

MAX_QUESTIONS = 1000
MAX_SQL_CHARS = 100_000


class AskRequest(BaseModel):
    """One question (``question``) or many (``questions``), not both."""

    question: str | None = Field(
        default=None, max_length=MAX_QUESTION_CHARS, description="One question"
    )
    questions: list[Annotated[str, Field(max_length=MAX_QUESTION_CHARS)]] | None = Field(
        default=None,
        max_length=MAX_QUESTIONS,
        description="Several questions, answered as one batch",
    )
    hint: str | None = Field(
        default=None,
        max_length=MAX_QUESTION_CHARS,
        description='With question: what the question does not say ("female refers to gender '
        "= 'F'\"); the catalogue ranks its words and the plan sees it. Kept with the run.",
    )
    hints: list[Annotated[str, Field(max_length=MAX_QUESTION_CHARS)]] | None = Field(
        default=None,
        max_length=MAX_QUESTIONS,
        description='With questions: one hint per question, in order ("" for none)',
    )

    @model_validator(mode="after")
    def _one_of(self) -> AskRequest:
        if (self.question is None) == (self.questions is None):
            raise ValueError("give either question or questions")
        if not [q for q in self.all() if q.strip()] or any(not q.strip() for q in self.all()):
            raise ValueError("questions must not be empty")
        if self.hint is not None and self.question is None:
            raise ValueError("hint goes with question; with questions give hints, one each")
        if self.hints is not None and (
            self.questions is None or len(self.hints) != len(self.questions)
        ):
            raise ValueError("hints goes with questions: one hint per question, in order")
        return self

    def all(self) -> list[str]:
        return [self.question] if self.question is not None else list(self.questions or [])

    def all_hints(self) -> list[str] | None:
        """One hint per question of ``all()``, or None when none was given."""
        return [self.hint] if self.hint is not None else self.hints


class RunAccepted(BaseModel):
    run_id: str = Field(description="The new run's id; follow it on /events or /runs/{run_id}")
    status: str = Field(description="Always queued: the run starts in the background")
    questions: list[str] = Field(description="The questions, as they will be answered")
    follow_up_of: str | None = Field(
        default=None, description="For a follow-up: the run whose clarifying questions it answers"
    )


class ClarifyRequest(BaseModel):
    """The analyst's answers to a run's clarifying questions, by their ids."""

    model_config = ConfigDict(extra="forbid")

    answers: dict[
        Annotated[str, Field(max_length=100)], Annotated[str, Field(max_length=MAX_ANSWER_CHARS)]
    ] = Field(
        max_length=50,
        description="clarifying question id -> answer; at least one; unanswered ids are left out",
        examples=[{"metric": "revenue", "entity": "products"}],
    )
    question_id: str | None = Field(
        default=None,
        max_length=20,
        description="Which of the run's questions (q1, q2, ...); needed only when several wait",
    )


class RowsPage(BaseModel):
    """A page of a question's full result (``GET /runs/{id}/rows``)."""

    run_id: str = Field(description="The run's id")
    question_id: str = Field(description="The question the rows answer (q1, q2, ...)")
    columns: list[str] = Field(description="Column labels in result order")
    rows: list[list[Any]] = Field(description="Rows offset .. offset+limit-1, JSON-safe values")
    offset: int = Field(description="Index of the first row of this page")
    row_count: int = Field(description="Rows in the whole stored result (at most row_cap)")
    truncated: bool = Field(
        description="True when the LIMIT the safety policy set or the row cap cut the result"
    )
    row_cap: int = Field(description="The most rows kept for this statement")
    next_offset: int | None = Field(description="Where the next page starts; null on the last")


class RunView(BaseModel):
    run_id: str = Field(description="The run's id")
    owner: str = Field(description="The analyst who asked")
    status: str = Field(description="queued, running, awaiting_approval, finished or failed")
    batch_id: str | None = Field(
        description="The approval batch the run waits on (or last waited on)"
    )
    questions: list[str] = Field(description="The questions, in order")
    results: list[dict[str, Any]] | None = Field(
        description="One RunResult per question, once known; each approval carries decided_by"
    )
    error: dict[str, Any] | None = Field(default=None, description="Why the run failed")
    created_at: str = Field(description="When the run was asked (ISO 8601, UTC)")
    updated_at: str = Field(description="When the run last changed (ISO 8601, UTC)")
    follow_up_of: str | None = Field(
        default=None, description="The run whose clarifying questions this run answers"
    )
    follow_ups: list[str] = Field(
        default_factory=list,
        description="Runs started to answer this run's clarifying questions, oldest first",
    )

    @classmethod
    def of(
        cls,
        row: RunRow,
        results: list[dict[str, Any]] | None = None,
        follow_ups: list[str] | None = None,
    ) -> RunView:
        """The view of a stored run; ``results`` replaces the stored ones (e.g. enriched)."""
        error = {k: v for k, v in row.error.items() if k != "trace"} if row.error else None
        return cls(
            run_id=row.run_id,
            owner=row.owner,
            status=row.status,
            batch_id=row.batch_id,
            questions=row.questions,
            results=results if results is not None else row.results,
            error=error,
            created_at=row.created_at,
            updated_at=row.updated_at,
            follow_up_of=row.follow_up_of,
            follow_ups=follow_ups or [],
        )


class BatchSummaryView(BaseModel):
    batch_id: str = Field(description="The batch's id")
    run_id: str = Field(description="The run it belongs to")
    cycle: int = Field(description="1 for a run's first approval, +1 per re-approval")
    status: str = Field(description="pending, resolved or expired")
    version: int = Field(description="Bumped by every state change")
    pending: int = Field(description="Statements waiting for a decision")
    votes: int = Field(description="Distinct reviewers who voted so far")
    quorum: int = Field(description="Votes needed to resolve the batch")
    created_at: str = Field(description="When the batch was opened (ISO 8601)")
    deadline: str | None = Field(description="When the expiry action applies, if ever")
    risk: str | None = Field(
        default=None, description="The highest risk level among the pending statements"
    )


class DecisionRequest(BaseModel):
    """``decisions`` must cover exactly the batch's pending ``call_id`` s. Nothing else is accepted
    (the actor is the token's)."""

    model_config = ConfigDict(extra="forbid")

    decisions: dict[str, Any] = Field(
        description='call_id -> "approve" | {"action": "approve"} | {"action": "reject", "reason": "..."} '
        '| {"action": "edit", "sql": "..."}',
        examples=[
            {"call_0123": "approve", "call_4567": {"action": "reject", "reason": "too broad"}}
        ],
    )


class DecisionView(BaseModel):
    batch_id: str = Field(description="The decided batch")
    run_id: str = Field(description="The run it belongs to")
    status: str = Field(description="resolved, or pending while a quorum waits for more votes")
    decided_by: str | None = Field(description="The reviewer whose decision resolved it")
    resolutions: dict[str, dict[str, Any]] = Field(description="call_id -> what became of it")
    votes: int = Field(default=0, description="Distinct reviewers who voted so far")
    quorum: int = Field(
        default=1,
        description="Votes the batch needs now (an edit that raises the risk raises it)",
    )


class EditCheck(BaseModel):
    """SQL a reviewer is about to submit as an edit."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(max_length=MAX_SQL_CHARS, description="The edited SQL, as typed")


class EditVerdict(BaseModel):
    """What the decision would say of this edit, checked with the validator the decision uses."""

    call_id: str = Field(description="The item the edit replaces")
    ok: bool = Field(description="The edit would be accepted")
    sql: str | None = Field(
        description="The SQL that would run (LIMIT enforced, ...); None if refused"
    )
    sql_pretty: str | None = Field(description="``sql`` pretty-printed for reading")
    refusal: str | None = Field(description="code: message of the finding that refuses it")
    findings: list[dict[str, Any]] = Field(description="Every finding, rewrites included")
    diff: list[DiffLine] = Field(
        description="Line diff from the model's SQL to what would run (to the edit if refused)"
    )
    risk: StatementRisk | None = Field(
        default=None,
        description="The planner's estimate and the risk level of what would run (None if refused)",
    )


class ErrorBody(BaseModel):
    code: str = Field(description="Stable machine-readable code")
    message: str = Field(description="What went wrong, in words")
    problems: list[dict[str, str]] | None = Field(
        default=None, description="Every problem of a refused request: code, call_id, message"
    )
    decided_by: str | None = Field(
        default=None, description="On a decision conflict: who decided the batch first"
    )


class ErrorResponse(BaseModel):
    error: ErrorBody = Field(description="The one error shape of every endpoint")


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "no token, or an unknown one"},
    403: {"model": ErrorResponse, "description": "the token's role may not do this"},
    422: {
        "model": ErrorResponse,
        "description": "invalid_request: the body, a parameter or a header is not valid",
    },
}
