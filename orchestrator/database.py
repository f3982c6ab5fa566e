"""Deprecated: ``orchestrator.database`` (the target database's factory) moved to ``orchestrator.core.database``.

This module names what the new one exports and warns when it is imported; it will be removed
in 0.2.0.
"""

import orchestrator.core.database as _moved
from orchestrator.core.database import *  # noqa: F403 - the old path names everything the new one exports
from sqlgate_exports import warn_moved

__all__ = list(_moved.__all__)

warn_moved(__name__, "orchestrator.core.database", removed_in="0.2.0")
