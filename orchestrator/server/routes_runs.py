"""``/runs``: ask one question or many, list the caller's runs, read one run."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi import Path as PathParam

from orchestrator.server.dependencies import Caller, ServiceDep
from orchestrator.server.errors import RunNotFound
from orchestrator.server.models import (
    ERRORS,
    AskRequest,
    ErrorResponse,
    RunAccepted,
    RunView,
)
from orchestrator.server.security import GuardedRoute, needs

router = APIRouter(prefix="/runs", tags=["runs"], responses=ERRORS, route_class=GuardedRoute)


@router.post("", status_code=202, response_model=RunAccepted, openapi_extra=needs("ask"))
def submit_run(body: AskRequest, principal: Caller, service: ServiceDep) -> RunAccepted:
    """Ask one question or many. The run starts in the background; follow it on /events."""
    questions = body.all()
    run_id = service.runs.submit(questions, principal.actor)
    return RunAccepted(run_id=run_id, status="queued", questions=questions)


@router.get("", response_model=list[RunView], openapi_extra=needs("read_runs"))
def list_runs(
    principal: Caller, service: ServiceDep, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> list[RunView]:
    """The caller's runs, newest first (an admin's: every run)."""
    owner = None if principal.may("read_any_run") else principal.actor
    return [RunView.of(row) for row in service.state.runs(owner=owner, limit=limit)]


@router.get(
    "/{run_id}",
    response_model=RunView,
    responses={404: {"model": ErrorResponse, "description": "no such run of the caller's"}},
    openapi_extra=needs("read_runs"),
)
def get_run(
    run_id: Annotated[str, PathParam(max_length=64)], principal: Caller, service: ServiceDep
) -> RunView:
    """A run's status and, once known, one result per question."""
    row = service.state.run(run_id)
    if row is None or (row.owner != principal.actor and not principal.may("read_any_run")):
        raise RunNotFound(f"no run {run_id!r}")
    return RunView.of(row)
