"""``sqlgate mcp --transport http``: MCP over streamable HTTP, behind the bearer tokens of
``sqlgate serve``.

Every HTTP request must carry ``Authorization: Bearer <token>`` of the token registry; the
token's principal is what the tools see as the caller (``tools.principal_of``): analysts and
admins may ask, and read their own runs. A request without a known token is answered 401 before
it reaches the MCP session.
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
from orchestrator.interfaces.server.errors import Unauthenticated

MCP_PATH = "/mcp"


class BearerAuth:
    """ASGI middleware: authenticates every HTTP request with the token registry."""

    def __init__(self, app: ASGIApp, tokens: TokenRegistry) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        headers = dict(scope.get("headers") or [])
        header = headers.get(b"authorization", b"").decode("latin-1") or None
        try:
            principal = self.tokens.authenticate(header)
        except Unauthenticated as exc:
            body = json.dumps({"error": {"code": exc.code, "message": exc.message}}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app({**scope, PRINCIPAL_SCOPE_KEY: principal}, receive, send)


def create_http_app(config: McpConfig, *, host: str = "127.0.0.1") -> Any:
    """The ASGI app: the SDK's streamable HTTP app at ``/mcp``, behind ``BearerAuth``."""
    if config.tokens is None or len(config.tokens) == 0:
        raise ConfigurationError("the HTTP transport needs bearer tokens (SQLGATE_TOKENS_FILE)")
    server = build_server(config)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return BearerAuth(app, config.tokens)


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
