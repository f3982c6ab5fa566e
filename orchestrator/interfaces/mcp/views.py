"""What the MCP tools answer: a run as an agent needs to see it; the schema, a verdict, the policy.

A run's report says where the run is (``queued``, ``running``, ``awaiting_approval``,
``finished``, ``failed``), what is waiting at the gate and where a person reviews it, and, per
question: the status, the answer, the SQL that ran, a bounded set of rows (``truncated`` when
there were more), the warnings, and who approved.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from approvals import ApprovalStore, BatchNotFound, BatchRecord, StatementRisk
from orchestrator.core.server_state import RunRow


class ReviewPlace(BaseModel):
    """Where a person reviews the SQL waiting in a batch. The agent cannot approve it."""

    batch_id: str = Field(description="The approval batch waiting for a reviewer")
    reviewer_url: str | None = Field(
        default=None, description="The reviewer page, when the server was configured with one"
    )
    command: str = Field(description="The command a reviewer runs to decide the batch")
    note: str = Field(
        default="Only a reviewer, with their own credentials, can approve, edit or reject this "
        "SQL. Tell the user; then call wait_for_run.",
        description="What to do next",
    )


class WaitingStatement(BaseModel):
    """One SQL statement waiting at the gate."""

    call_id: str = Field(description="The statement's id in the batch")
    question: str = Field(description="The question it answers")
    sql: str = Field(description="The SQL waiting for approval, exactly as it would run")
    findings: list[str] = Field(
        default_factory=list, description="The validator's notes (rewrites, warnings)"
    )
    risk: StatementRisk | None = Field(
        default=None,
        description="Risk level and the engine's estimate (rows, scans, sensitive columns read)",
    )


class Approval(BaseModel):
    """How the gate resolved one statement."""

    batch_id: str
    call_id: str
    status: str = Field(description="approved, edited, rejected, denied or auto_approved")
    decided_by: str | None = Field(
        default=None, description="The reviewer whose decision resolved the batch"
    )
    reason: str | None = None


class ErrorInfo(BaseModel):
    code: str = Field(description="Stable error code, e.g. unsafe, rejected, rate_limited")
    message: str
    retry_after: float | None = Field(
        default=None, description="Seconds to wait before asking again (rate_limited)"
    )


class ClarifyingQuestion(BaseModel):
    """A question sqlgate asks back; answer it with ``answer_clarification`` under its id."""

    id: str = Field(description="The id to answer under, in answer_clarification's answers")
    text: str


class QuestionReport(BaseModel):
    """One question of a run, once known."""

    question_id: str = Field(description="The question's id in the run (q1, q2, ...): get_rows")
    question: str
    status: str = Field(
        description="answered, awaiting_approval, needs_clarification, rejected, unsafe, "
        "execution_failed, timed_out, rate_limited, llm_error, database_error, invalid_input, "
        "cancelled"
    )
    answer: str | None = Field(default=None, description="The answer in plain language")
    sql: str | None = Field(default=None, description="The SQL that ran (or was proposed)")
    columns: list[str] = Field(default_factory=list)
    rows: list[list[Any]] = Field(
        default_factory=list, description="The first result rows; get_rows pages through all"
    )
    row_count: int | None = Field(default=None, description="Rows the query returned")
    truncated: bool = Field(
        default=False,
        description="True when there were more rows than are shown here (get_rows has them)",
    )
    warnings: list[str] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    clarification_questions: list[ClarifyingQuestion] = Field(
        default_factory=list,
        description="What to ask the user (needs_clarification); answer with answer_clarification",
    )
    approvals: list[Approval] = Field(default_factory=list, description="Who approved what")
    error: ErrorInfo | None = None


class RunReport(BaseModel):
    """A run as sqlgate knows it."""

    run_id: str
    status: str = Field(description="queued, running, awaiting_approval, finished or failed")
    questions: list[QuestionReport] = Field(default_factory=list)
    waiting: list[WaitingStatement] = Field(
        default_factory=list, description="SQL waiting for a reviewer (awaiting_approval)"
    )
    review: ReviewPlace | None = Field(
        default=None, description="Where a person reviews the waiting SQL"
    )
    error: ErrorInfo | None = Field(
        default=None,
        description="Why the run failed (failed), or why a decided run has not gone on yet",
    )
    runs_as: str | None = Field(
        default=None,
        description="The database login (user, and role) the run's SQL executes as",
    )


class RunSummary(BaseModel):
    """One run in a list: enough to find it again."""

    run_id: str
    status: str = Field(description="queued, running, awaiting_approval, finished or failed")
    questions: list[str]
    batch_id: str | None = Field(default=None, description="Its latest approval batch")
    follow_up_of: str | None = Field(
        default=None, description="The run whose clarifying questions it answers"
    )
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, row: RunRow) -> RunSummary:
        return cls(
            run_id=row.run_id,
            status=row.status,
            questions=list(row.questions),
            batch_id=row.batch_id,
            follow_up_of=row.follow_up_of,
            created_at=str(row.created_at),
            updated_at=str(row.updated_at),
        )


class RunList(BaseModel):
    runs: list[RunSummary] = Field(description="The caller's runs, newest first")
    next_offset: int | None = Field(
        default=None, description="The offset of the next page; null on the last page"
    )


class RowsPage(BaseModel):
    """A page of the rows one question kept."""

    run_id: str
    question_id: str
    columns: list[str]
    rows: list[list[Any]]
    offset: int = Field(description="The index of the first row of this page")
    row_count: int = Field(description="Rows kept in all")
    next_offset: int | None = Field(description="Where the next page starts; null at the end")
    truncated: bool = Field(
        description="True when the query had more rows than the policy's row cap kept"
    )


class PublishedTool(BaseModel):
    """A reviewed template, now a tool every agent of this database sees."""

    name: str
    description: str
    input_schema: dict[str, Any] = Field(description="The tool's arguments")
    sql: str = Field(description="The reviewed statement its arguments fill in")
    template_id: str
    example_id: int
    published_by: str


class SchemaAnswer(BaseModel):
    dialect: str = Field(description="SQL dialect of the database: sqlite, postgres, mysql, duckdb")
    tables: list[str] = Field(description="Tables described (requested ones and their neighbours)")
    unknown_tables: list[str] = Field(default_factory=list, description="Names matching no table")
    text: str = Field(description="The tables as DDL-like text: columns, types, keys, foreign keys")


class Verdict(BaseModel):
    ok: bool = Field(description="True when the policy accepts the SQL")
    dialect: str
    sql: str | None = Field(description="The SQL that would run (LIMIT enforced); nothing ran")
    findings: list[dict[str, Any]] = Field(default_factory=list, description="Rewrites, warnings")


class PolicyView(BaseModel):
    guarantee: str = Field(description="The one rule sqlgate keeps")
    dialect: str
    safety: dict[str, Any] = Field(description="The validator's policy (allowlist, row cap, ...)")
    row_cap: int = Field(description="Rows fetched at most per query")
    statement_timeout_s: float
    approval: dict[str, Any] = Field(description="Quorum, deadline and expiry action of a batch")
    who_decides: str
    rate_limit: str = Field(description="What happens when the model budget is used up")


#: What a question waiting at the gate says: the server resumes it, the agent only waits.
WAITING_MESSAGE = (
    "waiting for a reviewer's decision; this server resumes the run by itself once it is "
    "decided: call wait_for_run (or run_status) to follow it"
)


def review_place(batch_id: str, reviewer_url: str | None) -> ReviewPlace:
    return ReviewPlace(
        batch_id=batch_id,
        reviewer_url=reviewer_url,
        command=f"sqlgate approvals decide {batch_id}",
    )


def _batch(approvals: ApprovalStore, batch_id: str, cache: dict[str, BatchRecord | None]) -> Any:
    if batch_id not in cache:
        try:
            cache[batch_id] = approvals.get_batch(batch_id)
        except BatchNotFound:
            cache[batch_id] = None
    return cache[batch_id]


def _question(
    question_id: str,
    result: dict[str, Any],
    approvals: ApprovalStore,
    cache: dict[str, BatchRecord | None],
    max_rows: int,
) -> QuestionReport:
    rows = list(result.get("rows_preview") or [])
    count = result.get("row_count")
    shown = rows[:max_rows]
    truncated = bool(result.get("truncated")) or len(shown) < (
        count if isinstance(count, int) else len(rows)
    )
    records = []
    for entry in result.get("approvals") or []:
        record = _batch(approvals, entry["batch_id"], cache)
        outcome = record.outcome if record is not None else None
        records.append(
            Approval(
                batch_id=entry["batch_id"],
                call_id=entry["call_id"],
                status=entry["status"],
                decided_by=outcome.decided_by if outcome is not None else None,
                reason=entry.get("reason"),
            )
        )
    error = result.get("error")
    if error and error.get("code") == "awaiting_approval":
        # The service resumes the run by itself once a reviewer decides: nothing to run here.
        error = {**error, "message": WAITING_MESSAGE}
    return QuestionReport(
        question_id=question_id,
        question=result["question"],
        status=result["status"],
        answer=result.get("answer"),
        sql=result.get("sql"),
        columns=list(result.get("columns") or []),
        rows=shown,
        row_count=count,
        truncated=truncated,
        warnings=list(result.get("warnings") or []),
        assumptions=list(result.get("assumptions") or []),
        clarification_questions=[
            ClarifyingQuestion(id=str(q["id"]), text=str(q["text"]))
            for q in result.get("clarification_questions") or []
        ],
        approvals=records,
        error=ErrorInfo(**error) if error else None,
    )


def run_report(
    row: RunRow,
    approvals: ApprovalStore,
    *,
    reviewer_url: str | None,
    max_rows: int,
    runs_as: str | None = None,
    own_login: str | None = None,
) -> RunReport:
    """The report of one run from the service's row and the approvals store. ``runs_as`` is
    the login the run executes as, ``own_login`` the one this server would execute it with: a
    run whose batch was decided but which still waits says which process it waits for."""
    cache: dict[str, BatchRecord | None] = {}
    questions = [
        _question(f"q{i}", r, approvals, cache, max_rows)
        for i, r in enumerate(row.results or [], start=1)
    ]
    waiting: list[WaitingStatement] = []
    review = None
    if row.status == "awaiting_approval" and row.batch_id:
        record = _batch(approvals, row.batch_id, cache)
        if record is not None and record.status == "pending":
            pending = set(record.batch.pending_ids)
            waiting = [
                WaitingStatement(
                    call_id=item.call_id,
                    question=item.question,
                    sql=item.sql,
                    findings=[f.message for f in item.findings],
                    risk=item.risk,
                )
                for item in record.batch.items
                if item.call_id in pending
            ]
        review = review_place(row.batch_id, reviewer_url)
    error = None
    decided = (
        _batch(approvals, row.batch_id, cache)
        if row.status == "awaiting_approval" and row.batch_id
        else None
    )
    if decided is not None and decided.status != "pending" and own_login != runs_as:
        # decided, and this server may not execute it: say who can (its own runs it goes on
        # with by itself, a moment after the decision)
        by = decided.outcome.decided_by if decided.outcome is not None else None
        error = ErrorInfo(
            code="awaiting_execution",
            message=f"batch {row.batch_id} was {decided.status}{f' by {by}' if by else ''}; "
            f"the run goes on once a sqlgate process of its database that logs in as "
            f"{runs_as or 'its recorded login'} takes it (this server logs in as "
            f"{own_login or 'another login'}, so it leaves the run alone)",
        )
    if row.error:
        error = ErrorInfo(
            code=str(row.error.get("code", "server_error")),
            message=str(row.error.get("message", "")),
        )
    return RunReport(
        run_id=row.run_id,
        status=row.status,
        questions=questions,
        waiting=waiting,
        review=review,
        error=error,
        runs_as=runs_as,
    )
