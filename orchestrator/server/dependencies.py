"""What routes ask FastAPI for: the shared ``Service`` and the caller's ``Principal``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from orchestrator.server.auth import Principal
from orchestrator.server.errors import Unauthenticated
from orchestrator.server.service import Service

_bearer = HTTPBearer(
    auto_error=False, description="A token from SQLGATE_TOKENS / SQLGATE_TOKENS_FILE"
)


def service_of(request: Request) -> Service:
    """The app's one ``Service``."""
    service: Service = request.app.state.service
    return service


def caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The token's principal; the actor of everything the request does."""
    if credentials is None:
        raise Unauthenticated("an Authorization: Bearer <token> header is required")
    return service_of(request).tokens.authenticate(
        f"{credentials.scheme} {credentials.credentials}"
    )


Caller = Annotated[Principal, Depends(caller)]
ServiceDep = Annotated[Service, Depends(service_of)]
