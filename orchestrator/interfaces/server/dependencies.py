"""What routes ask FastAPI for: the shared ``Service`` and the caller's ``Principal``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from orchestrator.interfaces.server.auth import Principal
from orchestrator.interfaces.server.security import authenticate
from orchestrator.interfaces.server.service import Service

_bearer = HTTPBearer(
    auto_error=False, description="A token from SQLGATE_TOKENS / SQLGATE_TOKENS_FILE"
)


def service_of(request: Request) -> Service:
    """The app's one ``Service``."""
    service: Service = request.app.state.service
    return service


def caller(
    request: Request, _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The token's principal; the actor of everything the request does.

    ``GuardedRoute`` has already checked it (and the route's permission) before the body was read;
    ``_credentials`` only declares the bearer scheme in the OpenAPI spec.
    """
    return authenticate(request)


Caller = Annotated[Principal, Depends(caller)]
ServiceDep = Annotated[Service, Depends(service_of)]
