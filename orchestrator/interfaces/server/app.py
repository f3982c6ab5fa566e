"""``sqlgate serve``: the HTTP API, the live event stream and the two pages.

    GET  /health                      liveness (no token)
    GET  /me                          who the token is
    POST /runs                        ask one question or many -> 202 {run_id}     (analyst, admin)
    GET  /runs, /runs/{run_id}        own runs (admin: every run), status and results
    GET  /approvals                   batch summaries, pending first             (reviewer, admin)
    GET  /approvals/{batch_id}        one batch: items, SQL, findings, outcome
    POST /approvals/{batch_id}/decision   {call_id: decision}, Idempotency-Key header
    GET  /approvals/{batch_id}/memory what memory knows about each statement    (reviewer, admin)
    /memory/...                       reviewed-SQL memory: examples, notes, export, revoke (admin)
    GET  /notifications               webhook/e-mail deliveries and failures      (reviewer, admin)
    GET  /events                      Server-Sent Events; Last-Event-ID resumes   (any token)
    GET  /metrics                     Prometheus text format                             (admin)
    GET  /analyst, /reviewer          the pages; /openapi.json, /docs

Each area is an ``APIRouter`` in its own module (``routes_*``); errors are raised by the routes and
answered by one mapping (``error_handlers``) as ``{"error": {"code": ..., "message": ...}}``.
``security`` checks the token and role before any body is read, refuses oversized bodies (413)
and puts the security headers (CSP ``frame-ancestors 'none'``, ...) on every response.
Handlers that touch a database are plain ``def`` (FastAPI runs them in its thread pool); runs
execute in ``RunService``'s pool; the event stream waits on the ``EventHub``. Nothing blocks the
event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from orchestrator.interfaces.server import (
    routes_batches,
    routes_events,
    routes_identity,
    routes_memory,
    routes_metrics,
    routes_notifications,
    routes_pages,
    routes_runs,
    routes_service,
    routes_signin,
)
from orchestrator.interfaces.server.config import ServerConfig
from orchestrator.interfaces.server.error_handlers import install_error_handlers
from orchestrator.interfaces.server.security import BodySizeLimit, SecurityHeaders
from orchestrator.interfaces.server.service import Service

ROUTERS = (
    routes_service.router,
    routes_runs.router,
    routes_batches.router,
    routes_events.router,
    routes_memory.router,
    routes_metrics.router,
    routes_notifications.router,
    routes_pages.router,
    routes_identity.router,
    routes_signin.router,
)


def create_app(config: ServerConfig) -> FastAPI:
    """The ASGI app. Opens the stores and the target database now; starts the hub with the app."""
    service = Service(config)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await service.hub.start()
        try:
            yield
        finally:
            await service.hub.stop()
            service.close()

    app = FastAPI(
        title="sqlgate",
        version="0.1.0",
        description="Questions in plain language to SQL, with one batched human approval before anything runs.",
        lifespan=lifespan,
    )
    app.state.service = service
    install_error_handlers(app)
    # Outermost last: headers go on every answer, the 413 included.
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(SecurityHeaders)
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=routes_pages.STATIC), name="static")
    return app


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    db: str | None = None,
    tokens_file: str | None = None,
    workers: int | None = None,
    policy_file: str | None = None,
) -> None:
    """Build the app from the environment and serve it with uvicorn until interrupted."""
    import uvicorn

    config = ServerConfig.from_env(
        db=db, tokens_file=tokens_file, workers=workers, policy_file=policy_file
    )
    # Open event streams never end by themselves: give them a few seconds on shutdown, then close.
    uvicorn.run(
        create_app(config), host=host, port=port, log_level="info", timeout_graceful_shutdown=3
    )
