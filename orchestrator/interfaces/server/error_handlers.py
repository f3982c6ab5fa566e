"""The one place where an exception becomes an HTTP response. Routes raise; they never build one.

Every error is answered as ``{"error": {"code": ..., "message": ..., [problems], [decided_by]}}``:

    ServerError (and subclasses)          its own ``status`` and ``code``
    orchestrator.core.errors.RunNotFound       404 ``run_not_found``
    approvals.BatchNotFound               404
    approvals.DecisionError               422, with every problem (code, call_id, message)
    approvals.AuthorMayNotDecide          403 (four_eyes: the SQL is the caller's own)
    approvals.DecisionConflict (+ BatchExpired, DuplicateVote), IdempotencyConflict
                                          409, with ``decided_by`` when the batch was decided
    any other approvals.ApprovalError     500, with its code
    RequestValidationError                422 ``invalid_request``, one problem per field
    HTTPException (routing)               404 ``not_found``, 405 ``method_not_allowed``, ...
    anything else                         500 ``server_error`` (logged; no internals in the body)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from approvals import (
    ApprovalError,
    AuthorMayNotDecide,
    BatchNotFound,
    DecisionConflict,
    DecisionError,
    IdempotencyConflict,
)
from orchestrator.core.errors import RunNotFound
from orchestrator.interfaces.server.errors import ServerError
from orchestrator.interfaces.server.security import security_headers

log = logging.getLogger("sqlgate.server")

#: approvals error class -> HTTP status, most specific first
APPROVAL_STATUS: tuple[tuple[type[ApprovalError], int], ...] = (
    (AuthorMayNotDecide, 403),
    (BatchNotFound, 404),
    (DecisionError, 422),
    (DecisionConflict, 409),
    (IdempotencyConflict, 409),
    (ApprovalError, 500),
)
HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """The error body every endpoint answers with; ``extra`` fields that are None are left out."""
    body: dict[str, Any] = {"code": code, "message": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer", **(headers or {})}
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def approval_status(exc: ApprovalError) -> int:
    return next(status for kind, status in APPROVAL_STATUS if isinstance(exc, kind))


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServerError)
    headers = None
    if exc.status == 401 and request.app.state.service.tokens.provider is not None:
        from orchestrator.interfaces.server.identity import (
            PROTECTED_RESOURCE_PATH,
            www_authenticate,
        )

        metadata = str(request.base_url).rstrip("/") + PROTECTED_RESOURCE_PATH
        sent = request.headers.get("authorization") is not None  # RFC 6750: no error without one
        headers = {
            "WWW-Authenticate": www_authenticate(metadata, "invalid_token" if sent else None)
        }
    return error_response(exc.status, exc.code, exc.message, headers=headers)


async def _run_not_found(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RunNotFound)
    return error_response(404, exc.code, exc.message)


async def _approval_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApprovalError)
    status = approval_status(exc)
    if status == 500:
        log.error("approvals error on %s: %s", request.url.path, exc)
    problems = None
    if isinstance(exc, DecisionError):
        problems = [
            {"code": p.code, "call_id": p.call_id, "message": p.message} for p in exc.problems
        ]
    decided_by = None
    if status == 409:
        decided_by = await asyncio.to_thread(_decided_by, request, getattr(exc, "batch_id", ""))
    return error_response(status, exc.code, str(exc), problems=problems, decided_by=decided_by)


def _decided_by(request: Request, batch_id: str) -> str | None:
    """Who resolved the batch a conflicting decision was aimed at (None if unknown)."""
    try:
        outcome = request.app.state.service.approvals.get_batch(batch_id).outcome
    except ApprovalError:
        return None
    return outcome.decided_by if outcome is not None else None


async def _invalid_request(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {
            "code": "invalid_request",
            "call_id": "",
            "message": f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}",
        }
        for e in exc.errors()
    ]
    return error_response(422, "invalid_request", "the request is not valid", problems=problems)


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    # Answered outside the middleware stack: the security headers are added here.
    return error_response(
        500,
        "server_error",
        "the server failed to answer; see its log",
        headers=security_headers(request.url.path),
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping above on ``app``."""
    app.add_exception_handler(Exception, _unexpected)
    app.add_exception_handler(ServerError, _server_error)
    app.add_exception_handler(RunNotFound, _run_not_found)
    app.add_exception_handler(ApprovalError, _approval_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(StarletteHTTPException, _http_error)
