"""``/notifications``: what the outbox sent, and what it could not deliver (reviewers, admins)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from orchestrator.features.notify.outbox import NotificationStore
from orchestrator.interfaces.server.dependencies import Caller, ServiceDep
from orchestrator.interfaces.server.models import ERRORS
from orchestrator.interfaces.server.security import GuardedRoute, needs

router = APIRouter(
    prefix="/notifications", tags=["notifications"], responses=ERRORS, route_class=GuardedRoute
)


@router.get("", openapi_extra=needs("review"))
def list_notifications(
    principal: Caller,
    service: ServiceDep,
    status: Literal["sending", "delivered", "failed", "all"] = "all",
    run_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    """Deliveries, newest first (event, channel label, status, attempts, last error; never the
    payload's secret or the webhook's path), and how many failed in all."""
    store = service.state_db.store(NotificationStore)
    deliveries = store.list(
        status=None if status == "all" else status, run_id=run_id, limit=limit, offset=offset
    )
    return {
        "enabled": bool(service.notifier.channels),
        "failed": store.count(status="failed"),
        "deliveries": [d.as_json() for d in deliveries],
    }
