"""``/events``: Server-Sent Events of approvals and runs; ``Last-Event-ID`` resumes exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from orchestrator.interfaces.server.dependencies import Caller, ServiceDep
from orchestrator.interfaces.server.errors import InvalidLastEventId
from orchestrator.interfaces.server.events import Cursor, is_ahead, resync_sse
from orchestrator.interfaces.server.models import ERRORS, ErrorResponse
from orchestrator.interfaces.server.security import GuardedRoute, needs

router = APIRouter(tags=["events"], route_class=GuardedRoute)


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={
        **ERRORS,
        200: {
            "content": {"text/event-stream": {}},
            "description": "approval_requested, approval_decided, approval_expired, "
            "run_progress, run_finished, resync (reload: the Last-Event-ID was ahead of "
            "the server); id = A-R",
        },
        400: {"model": ErrorResponse, "description": "a malformed Last-Event-ID"},
    },
    openapi_extra=needs("events"),
)
async def events(
    request: Request,
    principal: Caller,
    service: ServiceDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
    after: Annotated[str | None, Query(max_length=64, description="Same as Last-Event-ID")] = None,
) -> StreamingResponse:
    """Server-Sent Events. Reconnect with ``Last-Event-ID`` to get every later event exactly once.

    Analysts receive the events of their own runs; reviewers and admins every event.
    """
    cursor: Cursor | None = None
    if last_event_id or after:
        try:
            cursor = Cursor.parse(last_event_id or after or "")
        except ValueError as exc:
            raise InvalidLastEventId(str(exc)) from exc
    resync: str | None = None
    if cursor is not None:
        head = await asyncio.to_thread(service.hub.source.head)
        if is_ahead(cursor, head):
            resync = resync_sse(head, f"Last-Event-ID {cursor} is ahead of the server ({head})")
            cursor = head
    everything = principal.may("all_events")
    keepalive = service.config.keepalive

    async def visible(run_id: str) -> bool:
        if everything:
            return True
        owner = service.state.cached_owner(run_id)
        if owner is None:
            owner = await asyncio.to_thread(service.state.owner_of, run_id)
        return owner == principal.actor

    async def stream() -> AsyncIterator[str]:
        yield f"retry: 1000\n: connected as {principal.actor}\n\n"
        if resync is not None:
            yield resync
        async for entry in service.hub.follow(cursor, keepalive=keepalive):
            if await request.is_disconnected():
                return
            if entry is None:
                yield ": keepalive\n\n"
                continue
            position, event = entry
            if await visible(event.run_id):
                yield event.sse(str(position))

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
