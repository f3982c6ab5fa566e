"""The two pages (plain HTML, JS and CSS from ``static/``, no build step)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from orchestrator.interfaces.server.security import PUBLIC, GuardedRoute

STATIC = Path(__file__).resolve().parent / "static"

router = APIRouter(include_in_schema=False, route_class=GuardedRoute)


@router.get("/", openapi_extra=PUBLIC)
def index() -> RedirectResponse:
    return RedirectResponse("/analyst")


@router.get("/analyst", openapi_extra=PUBLIC)
def analyst_page() -> FileResponse:
    return FileResponse(STATIC / "analyst.html", media_type="text/html")


@router.get("/reviewer", openapi_extra=PUBLIC)
def reviewer_page() -> FileResponse:
    return FileResponse(STATIC / "reviewer.html", media_type="text/html")
