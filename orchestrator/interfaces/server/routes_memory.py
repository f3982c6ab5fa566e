"""``/memory``: reviewed-SQL memory over HTTP, for admins; and memory's panel for reviewers.

    GET    /memory/examples                  examples, newest first (kind, limit)       (admin)
    GET    /memory/examples/{id}             one example
    DELETE /memory/examples/{id}             forget it
    GET    /memory/export                    every example and note, JSON Lines
    GET    /memory/notes                     business notes
    POST   /memory/notes                     add one {text, tables, all_databases}
    DELETE /memory/notes/{id}                forget it
    POST   /memory/revocations               revoke a template {template, reason, all_databases}
    GET    /approvals/{batch_id}/memory      per statement: similar approved questions, the
                                             template's earlier reviews, the notes that matched
                                             (reviewer, admin)

The actor of a note or a revocation is the token's actor. Without ``all_databases`` a note or a
revocation applies to the database this server serves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.core.database import policy_of
from orchestrator.features.memory import (
    BusinessNote,
    MemoryExample,
    MemoryNotFound,
    MemoryStore,
    Revocation,
)
from orchestrator.features.memory.hooks import scope_for
from orchestrator.features.memory.panel import memory_panel
from orchestrator.features.memory.store import ANY_DATABASE
from orchestrator.interfaces.server.dependencies import Caller, ServiceDep
from orchestrator.interfaces.server.errors import MemoryItemNotFound
from orchestrator.interfaces.server.models import ERRORS, ErrorResponse
from orchestrator.interfaces.server.security import GuardedRoute, needs
from orchestrator.interfaces.server.service import Service

router = APIRouter(tags=["memory"], responses=ERRORS, route_class=GuardedRoute)
ItemId = Annotated[int, PathParam(ge=1, le=2**62)]
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "memory_not_found: no such example or note"}
}
CURATE = needs("curate_memory")
#: Template ids are lower-case hex (``memory list`` shows their first ten characters).
TEMPLATE = r"^[0-9a-f]+$"


def _storable(value: Any) -> Any:
    """Text the state database can store (PostgreSQL refuses NUL characters)."""
    texts = value if isinstance(value, list) else [value]
    if any(isinstance(t, str) and "\x00" in t for t in texts):
        raise ValueError("a NUL character cannot be stored")
    return value


class NoteRequest(BaseModel):
    """A business note in the business's words, and the tables it concerns."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=4000, description='e.g. "Revenue means ..."')
    tables: list[Annotated[str, Field(max_length=200)]] = Field(
        default_factory=list, max_length=100, description="Tables it concerns"
    )
    all_databases: bool = Field(
        default=False, description="For every database, not only the one served here"
    )

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the note is empty")
        return value

    _no_nul = field_validator("text", "tables")(lambda cls, v: _storable(v))


class RevokeRequest(BaseModel):
    """A template to take back: its earlier approvals no longer earn auto-approval."""

    model_config = ConfigDict(extra="forbid")

    template: str = Field(
        min_length=4,
        max_length=32,
        pattern=TEMPLATE,
        description="Template id, or a unique prefix of one",
    )
    reason: str | None = Field(default=None, max_length=2000, description="Why, for the record")
    all_databases: bool = Field(
        default=False, description="On every database, not only the one served here"
    )

    _no_nul = field_validator("reason")(lambda cls, v: _storable(v))


class Removed(BaseModel):
    removed: int = Field(description="The id that was removed")
    type: Literal["example", "note"] = Field(description="What it was")


def _database(service: Service, everywhere: bool) -> str:
    return ANY_DATABASE if everywhere else service.database.safe_url


@router.get("/memory/examples", response_model=list[MemoryExample], openapi_extra=CURATE)
def list_examples(
    principal: Caller,
    service: ServiceDep,
    kind: Literal["positive", "negative", "all"] = "positive",
    template: Annotated[str | None, Query(max_length=32, pattern=TEMPLATE)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[MemoryExample]:
    """Reviewed examples of every database, newest first: approved, edited and seeded ones
    (``positive``), rejected ones with their reason (``negative``), or both."""
    return service.state_db.store(MemoryStore).examples(
        kind=None if kind == "all" else kind, template_id=template, limit=limit
    )


@router.get(
    "/memory/examples/{example_id}",
    response_model=MemoryExample,
    responses=NOT_FOUND,
    openapi_extra=CURATE,
)
def show_example(example_id: ItemId, principal: Caller, service: ServiceDep) -> MemoryExample:
    """One example: question, SQL, template, schema and policy fingerprints, reviewers."""
    try:
        return service.state_db.store(MemoryStore).example(example_id)
    except MemoryNotFound as exc:
        raise MemoryItemNotFound(exc.message) from None


@router.delete(
    "/memory/examples/{example_id}",
    response_model=Removed,
    responses=NOT_FOUND,
    openapi_extra=CURATE,
)
def remove_example(example_id: ItemId, principal: Caller, service: ServiceDep) -> Removed:
    """Forget one example (it no longer reaches prompts, nor counts for auto-approval)."""
    try:
        service.state_db.store(MemoryStore).remove_example(example_id)
    except MemoryNotFound as exc:
        raise MemoryItemNotFound(exc.message) from None
    return Removed(removed=example_id, type="example")


@router.get("/memory/export", openapi_extra=CURATE)
def export(principal: Caller, service: ServiceDep) -> StreamingResponse:
    """Every example and note as JSON Lines (``{"type": "example" | "note", ...}``)."""
    rows = list(service.state_db.store(MemoryStore).export())

    def lines() -> Iterator[str]:
        for row in rows:
            yield json.dumps(row, ensure_ascii=False) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@router.get("/memory/notes", response_model=list[BusinessNote], openapi_extra=CURATE)
def list_notes(principal: Caller, service: ServiceDep) -> list[BusinessNote]:
    """Every business note (of any database)."""
    return service.state_db.store(MemoryStore).notes()


@router.post("/memory/notes", response_model=BusinessNote, status_code=201, openapi_extra=CURATE)
def add_note(body: NoteRequest, principal: Caller, service: ServiceDep) -> BusinessNote:
    """Add a business note; the reasoning step sees it for questions that match."""
    return service.state_db.store(MemoryStore).add_note(
        body.text,
        author=principal.actor,
        tables=body.tables,
        database=_database(service, body.all_databases),
    )


@router.delete(
    "/memory/notes/{note_id}", response_model=Removed, responses=NOT_FOUND, openapi_extra=CURATE
)
def remove_note(note_id: ItemId, principal: Caller, service: ServiceDep) -> Removed:
    """Forget one business note."""
    try:
        service.state_db.store(MemoryStore).remove_note(note_id)
    except MemoryNotFound as exc:
        raise MemoryItemNotFound(exc.message) from None
    return Removed(removed=note_id, type="note")


@router.post(
    "/memory/revocations",
    response_model=Revocation,
    status_code=201,
    responses=NOT_FOUND,
    openapi_extra=CURATE,
)
def revoke(body: RevokeRequest, principal: Caller, service: ServiceDep) -> Revocation:
    """Revoke a template: its statements need review again, whatever was approved before."""
    try:
        return service.state_db.store(MemoryStore).revoke(
            body.template,
            actor=principal.actor,
            database=_database(service, body.all_databases),
            reason=body.reason,
        )
    except MemoryNotFound as exc:
        raise MemoryItemNotFound(exc.message) from None


def _example_view(
    e: MemoryExample, service: Service, offerable: frozenset[int] = frozenset()
) -> dict[str, Any]:
    location = service.approvals.locate_call(e.call_id) if e.call_id else None
    return {
        # approved and not superseded by a later rejection or revocation: may be proposed
        "offerable": e.id in offerable,
        "id": e.id,
        "question": e.question,
        "sql": e.sql,
        "status": e.status,
        "reviewers": e.reviewers,
        "reason": e.reason,
        "at": e.created_at.isoformat(),
        "batch_id": location.batch_id if location else None,
    }


@router.get("/approvals/{batch_id}/memory", openapi_extra=needs("review"))
def batch_memory(
    batch_id: Annotated[str, PathParam(max_length=64)], principal: Caller, service: ServiceDep
) -> dict[str, Any]:
    """For each statement of the batch: the similar questions reviewers approved before (with
    the batch each was approved in), the earlier approvals and rejections of its template, and
    the business notes that match its question. ``enabled`` is false when memory is off."""
    record = service.approvals.get_batch(batch_id)
    memory = service.memory
    if memory is None:
        return {"enabled": False, "items": {}}
    database = service.database
    scope = scope_for(database, policy_of(record.batch.context, database.policy))
    items: dict[str, Any] = {}
    for item in record.batch.items:
        panel = memory_panel(memory, scope, item.question, item.sql)
        items[item.call_id] = {
            "similar": [_example_view(e, service, panel.offerable) for e in panel.similar],
            "template_id": panel.template_id,
            "template_approvals": [
                _example_view(e, service, panel.offerable) for e in panel.template_approvals
            ],
            "template_rejections": [_example_view(e, service) for e in panel.template_rejections],
            "notes": [n.model_dump(mode="json") for n in panel.notes],
        }
    return {"enabled": True, "items": items}
