"""Deprecated: ``orchestrator.telemetry`` (OpenTelemetry traces) moved to
``orchestrator.core.telemetry``.

This module names the documented functions and warns when it is imported; it will be removed
in 0.2.0.
"""

from orchestrator.core.telemetry import enabled, use_tracer_provider, wanted
from sqlgate_exports import warn_moved

__all__ = ["enabled", "use_tracer_provider", "wanted"]

warn_moved(__name__, "orchestrator.core.telemetry", removed_in="0.2.0")
