"""``sqlgate serve``: the HTTP API, the live event stream and the two pages.

    GET  /health                      liveness (no token)
    GET  /me                          who the token is
    POST /runs                        ask one question or many -> 202 {run_id}     (analyst, admin)
    GET  /runs, /runs/{run_id}        own runs (admin: every run), status and results
    GET  /approvals                   batch summaries, pending first             (reviewer, admin)
    GET  /approvals/{batch_id}        one batch: items, SQL, findings, outcome
    POST /approvals/{batch_id}/decision   {call_id: decision}, Idempotency-Key header
    GET  /events                      Server-Sent Events; Last-Event-ID resumes   (any token)
    GET  /analyst, /reviewer          the pages; /openapi.json, /docs

Handlers that touch a database are plain ``def`` (FastAPI runs them in its thread pool); runs
execute in ``RunService``'s pool; the event stream waits on the ``EventHub``. Nothing blocks the
event loop. Errors are answered as ``{"error": {"code": ..., "message": ...}}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    FileResponse,
    JSONResponse,
    RedirectResponse,
    StreamingResponse,
)
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from approvals import (
    ApprovalError,
    ApprovalGate,
    BatchExpired,
    BatchNotFound,
    DecisionConflict,
    DecisionError,
    ExpirySweeper,
    IdempotencyConflict,
)
from orchestrator.server.auth import Principal, TokenRegistry
from orchestrator.server.config import ServerConfig
from orchestrator.server.errors import RunNotFound, ServerError, Unauthenticated
from orchestrator.server.events import Cursor, EventHub, EventSource
from orchestrator.server.runner import RunService, shared_pipeline
from orchestrator.server.state import RunRow
from orchestrator.tasks import broker_url, enqueue

STATIC = Path(__file__).resolve().parent / "static"
MAX_QUESTIONS = 1000
MAX_QUESTION_CHARS = 10_000


# -- request and response models -------------------------------------------------------------------


class AskRequest(BaseModel):
    """One question (``question``) or many (``questions``), not both."""

    question: str | None = Field(
        default=None, max_length=MAX_QUESTION_CHARS, description="One question"
    )
    questions: list[Annotated[str, Field(max_length=MAX_QUESTION_CHARS)]] | None = Field(
        default=None,
        max_length=MAX_QUESTIONS,
        description="Several questions, answered as one batch",
    )

    @model_validator(mode="after")
    def _one_of(self) -> AskRequest:
        if (self.question is None) == (self.questions is None):
            raise ValueError("give either question or questions")
        if not [q for q in self.all() if q.strip()] or any(not q.strip() for q in self.all()):
            raise ValueError("questions must not be empty")
        return self

    def all(self) -> list[str]:
        return [self.question] if self.question is not None else list(self.questions or [])


class RunAccepted(BaseModel):
    run_id: str
    status: str
    questions: list[str]


class RunView(BaseModel):
    run_id: str
    owner: str
    status: str = Field(description="queued, running, awaiting_approval, finished or failed")
    batch_id: str | None = Field(
        description="The approval batch the run waits on (or last waited on)"
    )
    questions: list[str]
    results: list[dict[str, Any]] | None = Field(
        description="One RunResult per question, once known"
    )
    error: dict[str, Any] | None = None
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, row: RunRow) -> RunView:
        error = {k: v for k, v in row.error.items() if k != "trace"} if row.error else None
        return cls(
            run_id=row.run_id,
            owner=row.owner,
            status=row.status,
            batch_id=row.batch_id,
            questions=row.questions,
            results=row.results,
            error=error,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


class BatchSummaryView(BaseModel):
    batch_id: str
    run_id: str
    cycle: int
    status: str
    version: int
    pending: int
    votes: int
    quorum: int
    created_at: str
    deadline: str | None


class DecisionRequest(BaseModel):
    """``decisions`` must cover exactly the batch's pending ``call_id`` s. Nothing else is accepted
    (the actor is the token's)."""

    model_config = ConfigDict(extra="forbid")

    decisions: dict[str, Any] = Field(
        description='call_id -> "approve" | {"action": "approve"} | {"action": "reject", "reason": "..."} '
        '| {"action": "edit", "sql": "..."}',
        examples=[
            {"call_0123": "approve", "call_4567": {"action": "reject", "reason": "too broad"}}
        ],
    )


class DecisionView(BaseModel):
    batch_id: str
    run_id: str
    status: str
    decided_by: str | None
    resolutions: dict[str, dict[str, Any]]


class ErrorBody(BaseModel):
    code: str
    message: str
    problems: list[dict[str, str]] | None = None
    decided_by: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "no token, or an unknown one"},
    403: {"model": ErrorResponse, "description": "the token's role may not do this"},
    422: {
        "model": ErrorResponse,
        "description": "invalid_request: the body, a parameter or a header is not valid",
    },
}


# -- the service ------------------------------------------------------------------------------------


class Service:
    """Everything the handlers share: tokens, stores, the run service and the event hub."""

    def __init__(self, config: ServerConfig) -> None:
        from orchestrator.database import TargetDatabase
        from orchestrator.state_db import StateDatabase

        self.config = config
        self.tokens: TokenRegistry = config.tokens
        self.state_db = StateDatabase(config.state_url)
        self.state_db.setup()
        self.approvals = self.state_db.approvals
        self.run_store = self.state_db.runs
        self.state = self.state_db.server
        self.database = TargetDatabase(
            config.database_url, statement_timeout_s=config.statement_timeout_s
        )
        limiter = config.limiter
        if limiter is None:
            from orchestrator.config import Settings
            from orchestrator.limits import build_limiter

            limiter = build_limiter(Settings(), mode="wait")
        self.hub = EventHub(
            EventSource(self.approvals, self.state),
            poll_interval=config.poll_interval,
            sweeper=ExpirySweeper(self.approvals),
            sweep_interval=config.sweep_interval,
        )
        pipeline = shared_pipeline(
            self.database,
            config.llm,
            limiter,
            self.approvals,
            self.run_store,
            config=config.pipeline,
            http_client=config.http_client,
        )
        self.runs = RunService(
            self.state,
            self.approvals,
            self.run_store,
            pipeline,
            workers=config.workers,
            notify=self.hub.poke,
            dispatch=enqueue if broker_url() else None,
        )
        self.hub.listeners.append(self.runs.on_event)
        self.runs.start_recovery()

    def close(self) -> None:
        self.runs.close()
        self.database.dispose()
        self.approvals.close()

    def gate_for(self, record: Any, actor: str) -> ApprovalGate:
        """A gate that validates edits in the dialect of the batch's database."""
        from safety import SafetyPolicy, SqlValidator

        dialect = record.batch.context.get("dialect") or self.database.dialect
        validator = SqlValidator(
            dialect=dialect, policy=SafetyPolicy(max_limit=self.config.pipeline.max_limit)
        )
        return ApprovalGate(
            reviewer=None,
            validate=validator.validate,
            store=self.approvals,
            run_id=record.batch.run_id,
            actor=actor,
        )


_bearer = HTTPBearer(
    auto_error=False, description="A token from SQLGATE_TOKENS / SQLGATE_TOKENS_FILE"
)


def caller(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The token's principal; the actor of everything the request does."""
    if credentials is None:
        raise Unauthenticated("an Authorization: Bearer <token> header is required")
    service: Service = request.app.state.service
    return service.tokens.authenticate(f"{credentials.scheme} {credentials.credentials}")


Caller = Annotated[Principal, Depends(caller)]


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


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

    # -- errors ------------------------------------------------------------------------------
    @app.exception_handler(ServerError)
    async def _server_error(_request: Request, exc: ServerError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {
                "code": "invalid_request",
                "call_id": "",
                "message": f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}",
            }
            for e in exc.errors()
        ]
        return _error(422, "invalid_request", "the request is not valid", problems=problems)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail))

    # -- health and identity -----------------------------------------------------------------
    @app.get("/health", tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness and what is served (no token needed)."""
        return {
            "status": "ok",
            "database": service.database.safe_url,
            "dialect": service.database.dialect,
        }

    @app.get("/me", tags=["service"], responses=ERRORS)
    def me(principal: Caller) -> dict[str, str]:
        """The actor and role of the token."""
        return {"actor": principal.actor, "role": str(principal.role)}

    # -- runs --------------------------------------------------------------------------------
    @app.post("/runs", status_code=202, response_model=RunAccepted, tags=["runs"], responses=ERRORS)
    def submit_run(body: AskRequest, principal: Caller) -> RunAccepted:
        """Ask one question or many. The run starts in the background; follow it on /events."""
        principal.require("ask")
        questions = body.all()
        run_id = service.runs.submit(questions, principal.actor)
        return RunAccepted(run_id=run_id, status="queued", questions=questions)

    @app.get("/runs", response_model=list[RunView], tags=["runs"], responses=ERRORS)
    def list_runs(
        principal: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 50
    ) -> list[RunView]:
        """The caller's runs, newest first (an admin's: every run)."""
        principal.require("read_runs")
        owner = None if principal.may("read_any_run") else principal.actor
        return [RunView.of(row) for row in service.state.runs(owner=owner, limit=limit)]

    @app.get(
        "/runs/{run_id}",
        response_model=RunView,
        tags=["runs"],
        responses={
            **ERRORS,
            404: {"model": ErrorResponse, "description": "no such run of the caller's"},
        },
    )
    def get_run(run_id: Annotated[str, PathParam(max_length=64)], principal: Caller) -> RunView:
        """A run's status and, once known, one result per question."""
        principal.require("read_runs")
        row = service.state.run(run_id)
        if row is None or (row.owner != principal.actor and not principal.may("read_any_run")):
            raise RunNotFound(f"no run {run_id!r}")
        return RunView.of(row)

    # -- approvals ---------------------------------------------------------------------------
    @app.get(
        "/approvals", response_model=list[BatchSummaryView], tags=["approvals"], responses=ERRORS
    )
    def list_batches(
        principal: Caller,
        status: Literal["pending", "resolved", "expired", "all"] = "pending",
        run_id: Annotated[str | None, Query(max_length=64)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[BatchSummaryView]:
        """Batch summaries, oldest first (without their items)."""
        principal.require("review")
        summaries = service.approvals.list_summaries(
            status=None if status == "all" else status, run_id=run_id, limit=limit
        )
        return [
            BatchSummaryView(
                batch_id=s.batch_id,
                run_id=s.run_id,
                cycle=s.cycle,
                status=s.status,
                version=s.version,
                pending=s.pending,
                votes=s.votes,
                quorum=s.quorum,
                created_at=s.created_at.isoformat(),
                deadline=s.deadline.isoformat() if s.deadline else None,
            )
            for s in summaries
        ]

    @app.get(
        "/approvals/{batch_id}",
        tags=["approvals"],
        responses={**ERRORS, 404: {"model": ErrorResponse, "description": "no such batch"}},
    )
    def get_batch(
        batch_id: Annotated[str, PathParam(max_length=64)], principal: Caller
    ) -> dict[str, Any]:
        """One batch as stored: every item (question, SQL, findings, category), status, outcome."""
        principal.require("review")
        try:
            record = service.approvals.get_batch(batch_id)
        except BatchNotFound as exc:
            return _error(404, exc.code, str(exc))  # type: ignore[return-value]
        data = record.model_dump(mode="json", exclude={"votes"})
        data["batch_id"] = record.batch_id
        data["pending_ids"] = record.batch.pending_ids
        data["voters"] = [v.actor for v in record.votes]
        return data

    @app.post(
        "/approvals/{batch_id}/decision",
        response_model=DecisionView,
        tags=["approvals"],
        responses={
            **ERRORS,
            404: {"model": ErrorResponse, "description": "batch_not_found"},
            409: {
                "model": ErrorResponse,
                "description": "decision_conflict, batch_expired, "
                "duplicate_vote or idempotency_conflict",
            },
            422: {
                "model": ErrorResponse,
                "description": "the decision is refused: unknown_call_id, "
                "missing_call_id, duplicate_call_id, invalid_decision, invalid_edit, ...",
            },
        },
    )
    def decide(
        batch_id: Annotated[str, PathParam(max_length=64)],
        body: DecisionRequest,
        principal: Caller,
        idempotency_key: Annotated[
            str | None, Header(alias="Idempotency-Key", max_length=200)
        ] = None,
    ) -> Any:
        """Decide every pending statement of a batch at once; exactly one decision wins.

        The actor is the token's, never the body's. A retry with the same Idempotency-Key and the
        same decision returns the first result; anything else on a decided batch is a 409.
        """
        principal.require("decide")
        try:
            record = service.approvals.get_batch(batch_id)
            if record.status != "pending" and idempotency_key is None:
                error = BatchExpired if record.status == "expired" else DecisionConflict
                raise error(batch_id, f"the batch is already {record.status}")
            outcome = service.gate_for(record, principal.actor).submit(
                batch_id, body.decisions, actor=principal.actor, idempotency_key=idempotency_key
            )
        except BatchNotFound as exc:
            return _error(404, exc.code, str(exc))
        except DecisionError as exc:
            problems = [
                {"code": p.code, "call_id": p.call_id, "message": p.message} for p in exc.problems
            ]
            return _error(422, exc.code, str(exc), problems=problems)
        except (DecisionConflict, IdempotencyConflict) as exc:
            decided_by = None
            try:
                stored = service.approvals.get_batch(batch_id).outcome
                decided_by = stored.decided_by if stored is not None else None
            except ApprovalError:
                pass
            return _error(409, exc.code, str(exc), decided_by=decided_by)
        service.hub.poke()
        return DecisionView(
            batch_id=batch_id,
            run_id=outcome.run_id,
            status=str(outcome.status),
            decided_by=outcome.decided_by,
            resolutions={cid: r.model_dump(mode="json") for cid, r in outcome.resolutions.items()},
        )

    # -- events ------------------------------------------------------------------------------
    @app.get(
        "/events",
        tags=["events"],
        response_class=StreamingResponse,
        responses={
            **ERRORS,
            200: {
                "content": {"text/event-stream": {}},
                "description": "approval_requested, approval_decided, approval_expired, "
                "run_progress, run_finished; id = A-R",
            },
            400: {"model": ErrorResponse, "description": "a malformed Last-Event-ID"},
        },
    )
    async def events(
        request: Request,
        principal: Caller,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
        after: Annotated[
            str | None, Query(max_length=64, description="Same as Last-Event-ID")
        ] = None,
    ) -> Any:
        """Server-Sent Events. Reconnect with ``Last-Event-ID`` to get every later event exactly once.

        Analysts receive the events of their own runs; reviewers and admins every event.
        """
        principal.require("events")
        cursor: Cursor | None = None
        if last_event_id or after:
            try:
                cursor = Cursor.parse(last_event_id or after or "")
            except ValueError as exc:
                return _error(400, "invalid_last_event_id", str(exc))
        everything = principal.may("all_events")

        async def visible(run_id: str) -> bool:
            if everything:
                return True
            owner = service.state.cached_owner(run_id)
            if owner is None:
                owner = await asyncio.to_thread(service.state.owner_of, run_id)
            return owner == principal.actor

        async def stream() -> AsyncIterator[str]:
            yield f"retry: 1000\n: connected as {principal.actor}\n\n"
            async for entry in service.hub.follow(cursor, keepalive=config.keepalive):
                if await request.is_disconnected():
                    return
                if entry is None:
                    yield ": keepalive\n\n"
                    continue
                position, event = entry
                if await visible(event.run_id):
                    yield event.sse(str(position))

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # -- pages -------------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse("/analyst")

    @app.get("/analyst", include_in_schema=False)
    def analyst_page() -> FileResponse:
        return FileResponse(STATIC / "analyst.html", media_type="text/html")

    @app.get("/reviewer", include_in_schema=False)
    def reviewer_page() -> FileResponse:
        return FileResponse(STATIC / "reviewer.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    db: str | None = None,
    tokens_file: str | None = None,
    workers: int | None = None,
) -> None:
    """Build the app from the environment and serve it with uvicorn until interrupted."""
    import uvicorn

    config = ServerConfig.from_env(db=db, tokens_file=tokens_file, workers=workers)
    # Open event streams never end by themselves: give them a few seconds on shutdown, then close.
    uvicorn.run(
        create_app(config), host=host, port=port, log_level="info", timeout_graceful_shutdown=3
    )
