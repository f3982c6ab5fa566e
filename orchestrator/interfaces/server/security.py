"""The web surface's walls, as pure ASGI middleware and one route class.

- ``SecurityHeaders``: every response carries a Content-Security-Policy with
  ``frame-ancestors 'none'``, ``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff`` and
  ``Referrer-Policy: no-referrer``, so no other origin can frame a signed-in page (a framed page
  would let a click decide a batch) and nothing is sniffed or leaked in a Referer; and
  ``Cache-Control: no-store``, so no cache keeps a page or an answer.
- ``BodySizeLimit``: a request body over the limit is answered 413 before it is read. A declared
  ``Content-Length`` over the limit is refused at once; a streamed body is counted chunk by chunk
  and refused as soon as it passes the limit. The connection is then closed, so the rest is never
  read into memory.
- ``GuardedRoute``: the token and the route's permission are checked before the body is read or
  validated, so a caller without the right token learns nothing about what a valid body is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.interfaces.server.auth import PERMISSIONS, Principal
from orchestrator.interfaces.server.errors import PayloadTooLarge, Unauthenticated

DEFAULT_MAX_BODY_BYTES = 1_048_576

#: The pages load only their own scripts and styles and talk only to their own origin.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
#: /docs and /redoc are FastAPI's, built from a CDN with an inline bootstrap script.
DOCS_POLICY = (
    "default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "font-src https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
    "https://cdn.redoc.ly; connect-src 'self'; worker-src blob:; base-uri 'none'; "
    "frame-ancestors 'none'"
)
DOCS_PATHS = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": PAGE_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), payment=()",
    # pages and data hold batches, SQL and rows: no browser or proxy keeps a copy
    "Cache-Control": "no-store",
}


def security_headers(path: str) -> dict[str, str]:
    """The headers every response to ``path`` carries."""
    if path in DOCS_PATHS:
        return {**SECURITY_HEADERS, "Content-Security-Policy": DOCS_POLICY}
    return dict(SECURITY_HEADERS)


class SecurityHeaders:
    """Adds ``security_headers(path)`` to every HTTP response (replacing any the app set)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in security_headers(scope["path"]).items()
        ]
        names = {name for name, _ in extra}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + extra}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _TooLarge(Exception):
    """Raised inside ``receive`` once the body passed the limit; ``BodySizeLimit`` answers it."""


class BodySizeLimit:
    """Refuses request bodies over ``max_bytes`` with 413 before reading them.

    Args:
        app: the wrapped ASGI app.
        max_bytes: the largest body accepted, in bytes; a body of exactly this size passes.
    """

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        received = 0
        too_large = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            if too_large:
                raise _TooLarge
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if too_large and not started:
                return  # the app's answer to a body it could not read: the 413 replaces it
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except _TooLarge:
            pass
        except Exception:
            if not too_large:
                raise
        if too_large and not started:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {
                "error": {
                    "code": PayloadTooLarge.code,
                    "message": f"the request body is larger than {self.max_bytes} bytes",
                }
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


# -- authentication before the body ----------------------------------------------------------------

PERMISSION_KEY = "x-sqlgate-permission"
#: ``openapi_extra`` of a route anyone may call (the pages, /health).
PUBLIC: dict[str, Any] = {PERMISSION_KEY: "public"}


def needs(permission: str) -> dict[str, Any]:
    """``openapi_extra`` of a route that needs ``permission`` (published in the OpenAPI spec).

    Example:
        >>> needs("decide")
        {'x-sqlgate-permission': 'decide'}
    """
    if permission not in PERMISSIONS:
        raise ValueError(f"unknown permission {permission!r}")
    return {PERMISSION_KEY: permission}


#: The cookie of a page's sign-in session (``routes_signin``): a random id, HttpOnly.
SESSION_COOKIE = "sqlgate_session"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def authenticate(request: Request) -> Principal:
    """The request's principal (cached on ``request.state``); ``Unauthenticated`` otherwise.

    A bearer token wins; without one, a sign-in session cookie. A request authenticated by the
    cookie that changes something must come from this service's own origin (its ``Origin``
    header, or ``Sec-Fetch-Site: same-origin``): another site cannot act with the cookie."""
    known = getattr(request.state, "principal", None)
    if isinstance(known, Principal):
        return known
    header = request.headers.get("authorization")
    service = request.app.state.service
    principal: Principal
    if header:
        principal = service.tokens.authenticate(header)
    else:
        secret = request.cookies.get(SESSION_COOKIE)
        found = service.web_sessions.principal(secret) if secret else None
        if found is None:
            raise Unauthenticated("an Authorization: Bearer <token> header is required")
        if request.method not in _SAFE_METHODS and not _same_origin(request):
            raise Unauthenticated(
                "a signed-in session acts only from this service's own pages (Origin differs)"
            )
        principal = found
    request.state.principal = principal
    return principal


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is not None:
        return origin.rstrip("/") == str(request.base_url).rstrip("/")
    return request.headers.get("sec-fetch-site") == "same-origin"


class GuardedRoute(APIRoute):
    """A route that checks the token and the permission its ``openapi_extra`` names
    (``needs(...)``) first, before FastAPI reads, parses or validates anything of the request.

    Fails closed: a route that declares neither ``needs(...)`` nor ``PUBLIC`` is refused when the
    app is built.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        permission = (self.openapi_extra or {}).get(PERMISSION_KEY)
        if permission is None:
            raise ValueError(f"{self.path}: declare openapi_extra=needs(...) or PUBLIC")
        if permission == "public":
            return handler

        async def guarded(request: Request) -> Response:
            authenticate(request).require(permission)
            return await handler(request)

        return guarded
