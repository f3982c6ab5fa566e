"""``/approvals``: batch summaries, one batch with its items, and the decision on a batch."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from fastapi import Path as PathParam

from approvals import BatchExpired, DecisionConflict
from orchestrator.server.dependencies import Caller, ServiceDep
from orchestrator.server.models import (
    ERRORS,
    BatchSummaryView,
    DecisionRequest,
    DecisionView,
    ErrorResponse,
)
from orchestrator.server.security import GuardedRoute, needs

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
    status: Literal["pending", "resolved", "expired", "all"] = "pending",
    run_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[BatchSummaryView]:
    """Batch summaries, oldest first (without their items)."""
    summaries = service.approvals.list_summaries(
        status=None if status == "all" else status, run_id=run_id, limit=limit
    )
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
        )
        for s in summaries
    ]


@router.get("/{batch_id}", responses=NOT_FOUND, openapi_extra=needs("review"))
def get_batch(batch_id: BatchId, principal: Caller, service: ServiceDep) -> dict[str, Any]:
    """One batch as stored: every item (question, SQL, findings, category), status, outcome."""
    record = service.approvals.get_batch(batch_id)
    data = record.model_dump(mode="json", exclude={"votes"})
    data["batch_id"] = record.batch_id
    data["pending_ids"] = record.batch.pending_ids
    data["voters"] = [v.actor for v in record.votes]
    return data


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
            "missing_call_id, duplicate_call_id, invalid_decision, invalid_edit, ...",
        },
    },
    openapi_extra=needs("decide"),
)
def decide(
    batch_id: BatchId,
    body: DecisionRequest,
    principal: Caller,
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
    )
