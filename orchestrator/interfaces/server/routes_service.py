"""``/health`` (liveness, no token) and ``/me`` (who the token is)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from orchestrator.interfaces.server.dependencies import Caller, ServiceDep
from orchestrator.interfaces.server.errors import ServerError
from orchestrator.interfaces.server.models import ERRORS
from orchestrator.interfaces.server.security import PUBLIC, GuardedRoute, authenticate, needs

router = APIRouter(tags=["service"], route_class=GuardedRoute)


@router.get("/health", openapi_extra=PUBLIC)
def health(request: Request, service: ServiceDep) -> dict[str, Any]:
    """Liveness (no token needed). Nothing about the deployment is told without a valid token;
    with one, the SQL dialect served. Never the database's address or anything secret."""
    try:
        authenticate(request)
    except ServerError:
        return {"status": "ok"}
    return {"status": "ok", "dialect": service.database.dialect}


@router.get("/me", responses=ERRORS, openapi_extra=needs("identify"))
def me(principal: Caller) -> dict[str, str | None]:
    """The actor and role of the token; for the identity provider's tokens, also its subject
    and issuer and the policy section the caller's questions get."""
    me: dict[str, str | None] = {"actor": principal.actor, "role": str(principal.role)}
    if principal.subject is not None:
        me.update(
            subject=principal.subject, issuer=principal.issuer, policy_role=principal.policy_role
        )
    return me
