"""``/approvals``: batch summaries, one batch with its items, the live check of an edit, and the
decision on a batch."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi import Path as PathParam

from approvals import ApprovalItem, BatchExpired, BatchRecord, DecisionConflict, StatementRisk
from approvals.decisions import parse_decision_file, refusal_text
from orchestrator.core.database import policy_of
from orchestrator.interfaces.server.dependencies import Caller, ServiceDep
from orchestrator.interfaces.server.errors import CallNotFound
from orchestrator.interfaces.server.models import (
    ERRORS,
    BatchSummaryView,
    DecisionRequest,
    DecisionView,
    EditCheck,
    EditVerdict,
    ErrorResponse,
)
from orchestrator.interfaces.server.security import GuardedRoute, needs
from orchestrator.interfaces.server.service import Service
from orchestrator.interfaces.server.sql_view import pretty_sql, sql_diff

router = APIRouter(
    prefix="/approvals", tags=["approvals"], responses=ERRORS, route_class=GuardedRoute
)
BatchId = Annotated[str, PathParam(max_length=64)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "batch_not_found: no such batch"}
}


@router.get("", response_model=list[BatchSummaryView], openapi_extra=needs("review"))
def list_batches(
    principal: Caller,
    service: ServiceDep,
    response: Response,
    status: Literal["pending", "resolved", "expired", "all"] = "pending",
    run_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    order: Literal["oldest", "newest"] = "oldest",
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[BatchSummaryView]:
    """Batch summaries (without their items), oldest first or newest first, a page at a time;
    ``X-Total-Count`` says how many batches of that status there are in all (not the page's)."""
    wanted = None if status == "all" else status
    if run_id is None:
        response.headers["X-Total-Count"] = str(service.approvals.count_batches(wanted))
    if order == "oldest":
        summaries = service.approvals.list_summaries(
            status=wanted, run_id=run_id, limit=offset + limit
        )[offset:]
    else:  # the store lists oldest first: newest first reads the whole (light) listing
        listed = service.approvals.list_summaries(status=wanted, run_id=run_id, limit=None)
        summaries = listed[::-1][offset : offset + limit]
    return [
        BatchSummaryView(
            batch_id=s.batch_id,
            run_id=s.run_id,
            cycle=s.cycle,
            status=s.status,
            version=s.version,
            pending=s.pending,
            votes=s.votes,
            quorum=s.quorum,
            created_at=s.created_at.isoformat(),
            deadline=s.deadline.isoformat() if s.deadline else None,
            risk=s.risk,
        )
        for s in summaries
    ]


@router.get("/records", openapi_extra=needs("review"))
def list_records(
    principal: Caller,
    service: ServiceDep,
    response: Response,
    status: Literal["pending", "resolved", "expired", "all"] = "pending",
    limit: Annotated[int, Query(ge=1, le=500)] = 200,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> list[dict[str, Any]]:
    """A page of whole batches (each as ``GET /approvals/{batch_id}`` shows it), oldest first:
    the reviewer page reads its inbox a page per request, not a request per batch. The
    ``X-Total-Count`` header is how many batches of that status there are in all."""
    wanted = None if status == "all" else status
    summaries = service.approvals.list_summaries(status=wanted, limit=offset + limit)[offset:]
    response.headers["X-Total-Count"] = str(service.approvals.count_batches(wanted))
    return [_record_view(service, service.approvals.get_batch(s.batch_id)) for s in summaries]


@router.get("/{batch_id}", responses=NOT_FOUND, openapi_extra=needs("review"))
def get_batch(batch_id: BatchId, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """One batch as stored: every item (question, SQL and its pretty form, findings, category,
    risk), status, outcome; who asked and when; the votes so far; the model's assumptions and a
    correction's error per statement; the audit trail (who did what, when)."""
    return _record_view(service, service.approvals.get_batch(batch_id))


def _record_view(service: Service, record: BatchRecord) -> dict[str, Any]:
    batch_id = record.batch_id
    dialect = _dialect(service, record)
    data = record.model_dump(mode="json", exclude={"votes"})
    data["batch_id"] = record.batch_id
    data["pending_ids"] = record.batch.pending_ids
    data["voters"] = [v.actor for v in record.votes]
    data["votes"] = [{"actor": v.actor, "at": v.at.isoformat()} for v in record.votes]
    for item in data["batch"]["items"]:
        item["sql_pretty"] = pretty_sql(item["sql"], dialect)
    run = service.state.run(record.batch.run_id)
    data["asked_by"] = run.owner if run is not None else None
    data["runs_as"] = record.batch.context.get("login")  # the database login the SQL runs as
    data["asked_at"] = run.created_at if run is not None else None
    data["corrections"] = _corrections(service, record, dialect)
    assumed = _assumptions(run.results if run is not None else None)
    data["assumptions"] = {
        item.call_id: assumed[item.question]
        for item in record.batch.items
        if assumed.get(item.question)
    }
    data["audit"] = [
        {
            "seq": e.seq,
            "at": e.at.isoformat(),
            "event": e.event,
            "actor": e.actor,
            "call_id": e.call_id,
            "detail": e.detail,
        }
        for e in service.approvals.audit_log(batch_id=batch_id)
    ]
    return data


def _corrections(service: Service, record: BatchRecord, dialect: str) -> dict[str, Any]:
    """For a correction cycle: per call_id, the previous cycle's SQL for the same question, the
    error it failed with, and the diff from it to the corrected SQL."""
    batch = record.batch
    if batch.cycle < 2:
        return {}
    earlier = [
        s
        for s in service.approvals.list_summaries(status=None, run_id=batch.run_id)
        if s.cycle == batch.cycle - 1
    ]
    if not earlier:
        return {}
    previous = service.approvals.get_batch(earlier[-1].batch_id)
    before: dict[str, str] = {}
    for item in previous.batch.items:
        resolution = previous.outcome.resolutions.get(item.call_id) if previous.outcome else None
        before[item.question_id] = resolution.sql if resolution and resolution.sql else item.sql
    run = service.state.run(batch.run_id)
    errors = _execution_errors(run.results if run is not None else None)
    # The ledger settles a failed execution before the correction is asked for, so its error is
    # there even when the run's results are not stored yet.
    settled: dict[str, str] = {}
    for item in previous.batch.items:
        execution = service.approvals.execution(item.call_id)
        if execution is not None and execution.state == "failed" and execution.detail:
            settled[item.question_id] = execution.detail.removeprefix("ExecutionError: ")
    # A statement the validator refused never ran: its refusal is what the correction answers.
    refused: dict[str, str] = {}
    for item in previous.batch.items:
        blocking = [f for f in item.findings if f.severity == "error"] if item.refused else []
        if blocking:
            refused[item.question_id] = f"{blocking[0].code}: {blocking[0].message}"
    corrections: dict[str, Any] = {}
    for item in batch.items:
        if item.question_id in before:
            corrections[item.call_id] = {
                "previous_cycle": previous.batch.cycle,
                "previous_batch_id": previous.batch_id,
                "previous_sql": before[item.question_id],
                "error": errors.get(item.question)
                or settled.get(item.question_id)
                or refused.get(item.question_id),
                "diff": [
                    line.model_dump()
                    for line in sql_diff(before[item.question_id], item.sql, dialect)
                ],
            }
    return corrections


def _assumptions(results: list[dict[str, Any]] | None) -> dict[str, list[str]]:
    """question -> the assumptions the model made answering it (Batch 1), as the run recorded."""
    return {
        str(r.get("question")): [str(a) for a in r.get("assumptions") or []] for r in results or []
    }


def _execution_errors(results: list[dict[str, Any]] | None) -> dict[str, str]:
    """question -> the last execution error its trace records (what the correction answers)."""
    errors: dict[str, str] = {}
    for result in results or []:
        failed = [
            t
            for t in result.get("trace") or []
            if t.get("agent") == "SQLExecutor" and not t.get("ok", True)
        ]
        if failed:
            errors[str(result.get("question"))] = str(failed[-1].get("output_summary"))
    return errors


def _dialect(service: Service, record: BatchRecord) -> str:
    return str(record.batch.context.get("dialect") or service.database.dialect)


@router.post(
    "/{batch_id}/items/{call_id}/validate",
    response_model=EditVerdict,
    responses={
        404: {"model": ErrorResponse, "description": "batch_not_found or call_not_found"},
    },
    openapi_extra=needs("decide"),
)
def validate_edit(
    batch_id: BatchId,
    call_id: Annotated[str, PathParam(max_length=64)],
    body: EditCheck,
    principal: Caller,
    service: ServiceDep,
) -> EditVerdict:
    """Check an edit before submitting it, with the validator the decision would use.

    Nothing is stored and nothing is decided: the same SQL submitted as an edit is accepted or
    refused exactly as this says (unless the policy changes in between).
    """
    record = service.approvals.get_batch(batch_id)
    try:
        item = record.batch.item(call_id)
    except KeyError:
        raise CallNotFound(f"no item {call_id!r} in batch {batch_id!r}") from None
    dialect = _dialect(service, record)
    result = service.edit_validator(record).validate(body.sql)
    ok = bool(result.ok and result.sql)
    runs = result.sql if ok and result.sql else body.sql
    return EditVerdict(
        call_id=call_id,
        ok=ok,
        sql=result.sql if ok else None,
        sql_pretty=pretty_sql(result.sql, dialect) if ok and result.sql else None,
        refusal=None if ok else refusal_text(result),
        findings=[f.model_dump(mode="json") for f in result.findings],
        diff=sql_diff(item.sql, runs, dialect),
        risk=_edit_risk(service, record, item, result.sql) if ok and result.sql else None,
    )


def _edit_risk(service: Service, record: BatchRecord, item: Any, sql: str) -> StatementRisk:
    """The risk of an accepted edit, under the policy the batch was made under: the decision
    assesses it again, and re-opens the batch when it needs more reviewers."""
    from orchestrator.features.risk import assessor_for

    assess = assessor_for(
        service.database, policy_of(record.batch.context, service.database.policy)
    )
    return assess(ApprovalItem.new(question_id=item.question_id, question=item.question, sql=sql))


async def strict_json_body(request: Request) -> None:
    """Refuse a body holding a key twice in any object (``duplicate_call_id``) or not a JSON object
    (``invalid_decision_file``), before anything is decided: a plain JSON parse would keep the
    last of two decisions for one call_id. The same parser reads decision files in the CLI."""
    parse_decision_file(await request.body())


@router.post(
    "/{batch_id}/decision",
    response_model=DecisionView,
    responses={
        **NOT_FOUND,
        409: {
            "model": ErrorResponse,
            "description": "decision_conflict, batch_expired, "
            "duplicate_vote or idempotency_conflict",
        },
        422: {
            "model": ErrorResponse,
            "description": "the decision is refused: unknown_call_id, "
            "missing_call_id, duplicate_call_id (a key twice in the body), invalid_decision_file "
            "(a body that is not a JSON object), invalid_decision, invalid_edit, ...",
        },
    },
    openapi_extra=needs("decide"),
)
def decide(
    batch_id: BatchId,
    body: DecisionRequest,
    principal: Caller,
    _strict: Annotated[None, Depends(strict_json_body)],
    service: ServiceDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
) -> DecisionView:
    """Decide every pending statement of a batch at once; exactly one decision wins.

    The actor is the token's, never the body's. A retry with the same Idempotency-Key and the
    same decision returns the first result; anything else on a decided batch is a 409.
    """
    record = service.approvals.get_batch(batch_id)
    if record.status != "pending" and idempotency_key is None:
        error = BatchExpired if record.status == "expired" else DecisionConflict
        raise error(batch_id, f"the batch is already {record.status}")
    outcome = service.gate_for(record, principal.actor).submit(
        batch_id, body.decisions, actor=principal.actor, idempotency_key=idempotency_key
    )
    service.hub.poke()
    return DecisionView(
        batch_id=batch_id,
        run_id=outcome.run_id,
        status=str(outcome.status),
        decided_by=outcome.decided_by,
        resolutions={cid: r.model_dump(mode="json") for cid, r in outcome.resolutions.items()},
        votes=outcome.votes,
        quorum=outcome.quorum,
    )
