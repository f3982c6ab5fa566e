"""``/metrics``: the process's counters in Prometheus's text format, for admins.

GET /metrics    runs, questions, LLM calls and tokens, limiter waits, approval latency,
                approval batches pending                                          (admin)
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from orchestrator.core import metrics
from orchestrator.interfaces.server.dependencies import ServiceDep
from orchestrator.interfaces.server.models import ERRORS
from orchestrator.interfaces.server.security import GuardedRoute, needs

router = APIRouter(tags=["service"], route_class=GuardedRoute)


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses=ERRORS,
    openapi_extra=needs("read_metrics"),
)
def read_metrics(service: ServiceDep) -> PlainTextResponse:
    """Every metric of this server process (text exposition format 0.0.4); the number of
    approval batches pending is read from the approvals store now."""
    text = metrics.METRICS.render([service.gauges])
    return PlainTextResponse(text, media_type=metrics.CONTENT_TYPE)
