"""``/health`` (liveness, no token) and ``/me`` (who the token is)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from orchestrator.server.dependencies import Caller, ServiceDep
from orchestrator.server.models import ERRORS

router = APIRouter(tags=["service"])


@router.get("/health")
def health(service: ServiceDep) -> dict[str, Any]:
    """Liveness and what is served (no token needed)."""
    return {
        "status": "ok",
        "database": service.database.safe_url,
        "dialect": service.database.dialect,
    }


@router.get("/me", responses=ERRORS)
def me(principal: Caller) -> dict[str, str]:
    """The actor and role of the token."""
    return {"actor": principal.actor, "role": str(principal.role)}
