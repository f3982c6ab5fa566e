"""``sqlgate mcp --transport http``: MCP over streamable HTTP, behind the bearer tokens of
``sqlgate serve``.

Every HTTP request must carry ``Authorization: Bearer <token>``: a static token of the registry,
or a JWT of the organisation's identity provider (``SQLGATE_OIDC_FILE``) minted for this
server's audience. The token's principal is what the tools see as the caller
(``tools.principal_of``): analysts and admins may ask, and read their own runs. A request
without a valid token is answered 401 before it reaches the MCP session; with an identity
provider, as the MCP authorization specification describes: ``WWW-Authenticate: Bearer
resource_metadata=...`` pointing at the protected-resource metadata (RFC 9728), served without a
token at ``/.well-known/oauth-protected-resource/mcp``, which names the provider.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from orchestrator.core.errors import ConfigurationError
from orchestrator.interfaces.mcp.config import McpConfig
from orchestrator.interfaces.mcp.server import build_server
from orchestrator.interfaces.mcp.tools import PRINCIPAL_SCOPE_KEY
from orchestrator.interfaces.server.auth import TokenRegistry
from orchestrator.interfaces.server.errors import ServerError
from orchestrator.interfaces.server.identity import (
    PROTECTED_RESOURCE_PATH,
    Authenticator,
    protected_resource_metadata,
    www_authenticate,
)

MCP_PATH = "/mcp"


class BearerAuth:
    """ASGI middleware: authenticates every HTTP request; serves the protected-resource
    metadata (when an identity provider is configured) to anyone."""

    def __init__(self, app: ASGIApp, tokens: Authenticator) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        provider = self.tokens.provider
        base = _base_url(scope)
        path = scope.get("path", "")
        if provider is not None and path in (PROTECTED_RESOURCE_PATH, METADATA_PATH):
            document = protected_resource_metadata(base + MCP_PATH, provider)
            await _answer(send, 200, document, [])
            return
        headers = dict(scope.get("headers") or [])
        header = headers.get(b"authorization", b"").decode("latin-1") or None
        try:
            principal = self.tokens.authenticate(header)
        except ServerError as exc:
            extra = []
            if exc.status == 401:
                challenge = (
                    www_authenticate(base + METADATA_PATH, "invalid_token" if header else None)
                    if provider is not None
                    else "Bearer"
                )
                extra.append((b"www-authenticate", challenge.encode("latin-1")))
            body = {"error": {"code": exc.code, "message": exc.message}}
            await _answer(send, exc.status, body, extra)
            return
        await self.app({**scope, PRINCIPAL_SCOPE_KEY: principal}, receive, send)


#: The metadata of the ``/mcp`` resource (RFC 9728: the well-known path, then the resource's).
METADATA_PATH = PROTECTED_RESOURCE_PATH + MCP_PATH


def _base_url(scope: Scope) -> str:
    """scheme://host[:port] of the request, as the client addressed it."""
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


async def _answer(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def create_http_app(config: McpConfig, *, host: str = "127.0.0.1") -> Any:
    """The ASGI app: the SDK's streamable HTTP app at ``/mcp``, behind ``BearerAuth``."""
    tokens = Authenticator(config.tokens or TokenRegistry({}), config.identity)
    if not tokens.configured:
        raise ConfigurationError(
            "the HTTP transport needs bearer tokens (SQLGATE_TOKENS_FILE) or an identity "
            "provider (SQLGATE_OIDC_FILE)"
        )
    if config.identity is not None:
        config.identity.check_policy_sections(config.policy.roles)
    server = build_server(config)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerAuth(app, tokens)


def serve_http(config: McpConfig, *, host: str = "127.0.0.1", port: int = 8001) -> None:
    """Serve MCP over streamable HTTP with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(
        create_http_app(config, host=host),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=3,
    )
