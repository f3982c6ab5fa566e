"""Deprecated: ``orchestrator.chart`` (the chart chosen for a result) moved to ``orchestrator.features.chart``.

This module names what the new one exports and warns when it is imported; it will be removed
in 0.2.0.
"""

import orchestrator.features.chart as _moved
from orchestrator.features.chart import *  # noqa: F403 - the old path names everything the new one exports
from sqlgate_exports import warn_moved

__all__ = list(_moved.__all__)

warn_moved(__name__, "orchestrator.features.chart", removed_in="0.2.0")
