"""``sqlgate serve``: the HTTP API, live Server-Sent Events and the analyst and reviewer pages.

    from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
    app = create_app(ServerConfig(database_url="sqlite:///shop.db", state_url="sqlite:///state.sqlite",
                                  tokens=TokenRegistry.from_file("tokens.json")))

Runs execute in a thread pool and pause at the approval gate; a reviewer decides on the page (or
over HTTP, or with ``sqlgate approvals decide``) and whichever process sees the decision first
resumes the run. Events come from the approvals audit log and the service's run events, so several
processes sharing one state database (PostgreSQL) publish the same stream.

Needs the ``server`` extra (fastapi, uvicorn).
"""

from orchestrator.core.server_state import ServerState
from orchestrator.interfaces.server.app import create_app, serve
from orchestrator.interfaces.server.auth import Principal, Role, TokenRegistry, token_digest
from orchestrator.interfaces.server.config import ServerConfig
from orchestrator.interfaces.server.errors import (
    CallNotFound,
    Forbidden,
    InvalidLastEventId,
    PayloadTooLarge,
    ServerError,
    TokenConfigError,
    TokenExpired,
    Unauthenticated,
)
from orchestrator.interfaces.server.events import (
    EVENT_TYPES,
    Cursor,
    EventHub,
    EventSource,
    ServerEvent,
)
from orchestrator.interfaces.server.runner import RunService, shared_pipeline
from orchestrator.interfaces.server.service import Service

__all__ = [
    "CallNotFound",
    "Cursor",
    "EVENT_TYPES",
    "EventHub",
    "EventSource",
    "Forbidden",
    "InvalidLastEventId",
    "PayloadTooLarge",
    "Principal",
    "Role",
    "RunService",
    "ServerConfig",
    "ServerError",
    "ServerEvent",
    "ServerState",
    "Service",
    "TokenConfigError",
    "TokenExpired",
    "TokenRegistry",
    "Unauthenticated",
    "create_app",
    "serve",
    "shared_pipeline",
    "token_digest",
]
