"""``/runs``: ask one question or many, list and search the caller's runs, read one run, answer a
run's clarifying questions (a follow-up run)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam

from approvals import ApprovalError, ApprovalOutcome
from orchestrator.core.errors import RunNotFound
from orchestrator.core.result import ClarifyingQuestionOut
from orchestrator.core.server_state import RunRow
from orchestrator.features.chart import choose_chart
from orchestrator.features.clarify import ClarificationError, follow_up_question
from orchestrator.interfaces.server.auth import Principal
from orchestrator.interfaces.server.dependencies import Caller, ServiceDep
from orchestrator.interfaces.server.errors import (
    InvalidClarification,
    NotClarifiable,
    QuestionTooLong,
)
from orchestrator.interfaces.server.models import (
    ERRORS,
    AskRequest,
    ClarifyRequest,
    ErrorResponse,
    RowsPage,
    RunAccepted,
    RunView,
)
from orchestrator.interfaces.server.security import GuardedRoute, needs
from orchestrator.interfaces.server.service import Service

#: Rows per page of ``GET /runs/{id}/rows`` at most: a page is built in memory.
MAX_ROWS_PAGE = 10_000

router = APIRouter(prefix="/runs", tags=["runs"], responses=ERRORS, route_class=GuardedRoute)


@router.post("", status_code=202, response_model=RunAccepted, openapi_extra=needs("ask"))
def submit_run(body: AskRequest, principal: Caller, service: ServiceDep) -> RunAccepted:
    """Ask one question or many. The run starts in the background; follow it on /events."""
    questions = body.all()
    _within_limit(service, questions)
    run_id = service.runs.submit(
        questions,
        principal.actor,
        principal.policy_section,
        identity=principal.identity,
        hints=body.all_hints(),
    )
    return RunAccepted(run_id=run_id, status="queued", questions=questions)


@router.get("", response_model=list[RunView], openapi_extra=needs("read_runs"))
def list_runs(
    principal: Caller,
    service: ServiceDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=100_000)] = 0,
    q: Annotated[
        str | None,
        Query(max_length=200, description="Only runs whose question or run id contains this"),
    ] = None,
) -> list[RunView]:
    """The caller's runs, newest first (an admin's: every run), a page at a time; ``q`` searches
    the questions and run ids (case-insensitive)."""
    owner = None if principal.may("read_any_run") else principal.actor
    rows = service.state.runs(owner=owner, limit=limit, offset=offset, q=(q or "").strip() or None)
    outcomes: dict[str, ApprovalOutcome | None] = {}
    follow_ups = service.state.follow_ups([row.run_id for row in rows])
    return [
        RunView.of(row, _with_reviewers(service, row.results, outcomes), follow_ups[row.run_id])
        for row in rows
    ]


@router.get(
    "/{run_id}",
    response_model=RunView,
    responses={404: {"model": ErrorResponse, "description": "no such run of the caller's"}},
    openapi_extra=needs("read_runs"),
)
def get_run(
    run_id: Annotated[str, PathParam(max_length=64)], principal: Caller, service: ServiceDep
) -> RunView:
    """A run's status and, once known, one result per question; the run it follows up
    (``follow_up_of``) and the follow-ups that answered its clarifying questions."""
    row = _own_run(service, principal, run_id)
    return RunView.of(
        row, _with_reviewers(service, row.results, {}), service.state.follow_ups([run_id])[run_id]
    )


@router.post(
    "/{run_id}/clarify",
    status_code=202,
    response_model=RunAccepted,
    responses={
        404: {"model": ErrorResponse, "description": "no such run of the caller's"},
        409: {"model": ErrorResponse, "description": "no question of the run awaits answers"},
    },
    openapi_extra=needs("ask"),
)
def clarify_run(
    run_id: Annotated[str, PathParam(max_length=64)],
    body: ClarifyRequest,
    principal: Caller,
    service: ServiceDep,
) -> RunAccepted:
    """Answer a run's clarifying questions (by id): a follow-up run starts in the background with
    the original question plus the answers, linked to this run (``follow_up_of``). It is an
    ordinary one-question run, with the budget of a normal question."""
    row = _own_run(service, principal, run_id)
    waiting = [
        (f"q{i + 1}", r)
        for i, r in enumerate(row.results or [])
        if r.get("status") == "needs_clarification"
    ]
    if body.question_id is not None:
        waiting = [(qid, r) for qid, r in waiting if qid == body.question_id]
    if not waiting:
        raise NotClarifiable(
            f"no question of run {run_id}"
            f"{f' with id {body.question_id}' if body.question_id else ''} needs clarification"
        )
    if len(waiting) > 1:
        raise NotClarifiable(
            f"several questions of run {run_id} need clarification "
            f"({', '.join(q for q, _ in waiting)}): say which with question_id"
        )
    result = waiting[0][1]
    asked = [ClarifyingQuestionOut(**q) for q in result.get("clarification_questions") or []]
    try:
        question = follow_up_question(result["question"], asked, body.answers)
    except ClarificationError as exc:
        raise InvalidClarification(exc.message) from exc
    new_id = service.runs.submit(
        [question],
        principal.actor,
        principal.policy_section,
        follow_up_of=run_id,
        identity=principal.identity,
        hints=[result.get("hint") or ""],
    )
    return RunAccepted(run_id=new_id, status="queued", questions=[question], follow_up_of=run_id)


def _within_limit(service: Service, questions: list[str]) -> None:
    """Refuse, before a run is created, a question the pipeline would refuse for its length."""
    limit = service.runs.pipeline.config.max_question_chars
    for n, question in enumerate(questions, start=1):
        if len(question.strip()) > limit:
            raise QuestionTooLong(
                f"question {n} has {len(question.strip())} characters; at most {limit} are read"
            )


def _own_run(service: Service, principal: Principal, run_id: str) -> RunRow:
    row = service.state.run(run_id)
    if row is None or (row.owner != principal.actor and not principal.may("read_any_run")):
        raise RunNotFound(f"no run {run_id!r}")
    return row


@router.get(
    "/{run_id}/rows",
    response_model=RowsPage,
    responses={404: {"model": ErrorResponse, "description": "no such run, or no rows stored"}},
    openapi_extra=needs("read_runs"),
)
def get_run_rows(
    run_id: Annotated[str, PathParam(max_length=64)],
    principal: Caller,
    service: ServiceDep,
    question: Annotated[
        str, Query(max_length=32, pattern=r"^q[0-9]+$", description="Question id: q1, q2, ...")
    ] = "q1",
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_ROWS_PAGE)] = 1000,
) -> RowsPage:
    """The full result of one question of a run, a page at a time (the run result carries only a
    preview). The rows are those the statement kept: the same row cap and LIMIT as the result,
    with ``truncated`` saying whether they cut it."""
    row = service.state.run(run_id)
    if row is None or (row.owner != principal.actor and not principal.may("read_any_run")):
        raise RunNotFound(f"no run {run_id!r}")
    header = service.state_db.results.header(run_id, question)
    if header is None:
        raise RunNotFound(f"run {run_id!r} has no stored rows for {question} (no result yet)")
    rows = service.state_db.results.page(run_id, question, offset=offset, limit=limit)
    end = offset + len(rows)
    return RowsPage(
        run_id=run_id,
        question_id=question,
        columns=header.columns,
        rows=rows,
        offset=offset,
        row_count=header.row_count,
        truncated=header.truncated,
        row_cap=header.row_cap,
        next_offset=end if end < header.row_count else None,
    )


def _with_reviewers(
    service: Service,
    results: list[dict[str, Any]] | None,
    outcomes: dict[str, ApprovalOutcome | None],
) -> list[dict[str, Any]] | None:
    """The results with, on each approval, who decided it (``decided_by``) and, for an edit, the
    model's SQL it replaced (``edited_from``), and the chart the result's shape deserves
    (``chart``: kind, x, y, reason). ``outcomes`` caches batches across runs."""
    if results is None:
        return None
    voters: dict[str, list[str]] = {}
    enriched = []
    for result in results:
        approvals = []
        for approval in result.get("approvals") or []:
            batch_id = approval.get("batch_id")
            if batch_id not in outcomes or batch_id not in voters:
                try:
                    record = service.approvals.get_batch(batch_id)
                    outcomes[batch_id] = record.outcome
                    voters[batch_id] = [v.actor for v in record.votes]  # every one of a quorum
                except ApprovalError:
                    outcomes[batch_id] = None
            outcome = outcomes[batch_id]
            resolution = outcome.resolutions.get(approval.get("call_id", "")) if outcome else None
            approvals.append(
                {
                    **approval,
                    "decided_by": outcome.decided_by if outcome else None,
                    "approvers": voters.get(batch_id, []),
                    "decided_at": outcome.decided_at.isoformat()
                    if outcome and outcome.decided_at
                    else None,
                    "edited_from": resolution.edited_from if resolution else None,
                }
            )
        chart = choose_chart(
            result.get("columns") or [], result.get("rows_preview") or [], result.get("row_count")
        )
        enriched.append({**result, "approvals": approvals, "chart": chart.to_dict()})
    return enriched
