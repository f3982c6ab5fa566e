"""Deprecated: ``orchestrator.pipeline`` (the pipeline and its configuration) moved to ``orchestrator.core.pipeline``.

This module names what the new one exports and warns when it is imported; it will be removed
in 0.2.0.
"""

import orchestrator.core.pipeline as _moved
from orchestrator.core.pipeline import *  # noqa: F403 - the old path names everything the new one exports
from sqlgate_exports import warn_moved

__all__ = list(_moved.__all__)

warn_moved(__name__, "orchestrator.core.pipeline", removed_in="0.2.0")
