"""The identity provider's side of the service: the protected-resource metadata (RFC 9728)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from orchestrator.interfaces.server.dependencies import ServiceDep
from orchestrator.interfaces.server.errors import NoIdentityProvider
from orchestrator.interfaces.server.identity import (
    PROTECTED_RESOURCE_PATH,
    protected_resource_metadata,
)
from orchestrator.interfaces.server.security import PUBLIC, GuardedRoute

router = APIRouter(route_class=GuardedRoute, tags=["identity"])


@router.get(PROTECTED_RESOURCE_PATH, openapi_extra=PUBLIC)
def protected_resource(request: Request, service: ServiceDep) -> dict[str, Any]:
    """Which authorization server issues this API's bearer tokens (404 with static tokens only)."""
    provider = service.tokens.provider
    if provider is None:
        raise NoIdentityProvider("this service takes static bearer tokens only")
    return protected_resource_metadata(str(request.base_url).rstrip("/"), provider)
