"""The hooks of a pipeline a feature builds for itself (eval, the demo) when its caller gives
none: clarification and the risk estimate before review, never memory (nothing is learned from
approvals nobody saw). The same as ``orchestrator.wiring.run_hooks()``, which the entry points
pass; here for library callers of ``EvalRun``, ``replay_eval`` and ``DemoSession``.

Example:
    >>> hooks = standalone_hooks()
    >>> hooks.assess is not None and hooks.answered is not None and hooks.after_execution is None
    True
"""

from __future__ import annotations

from orchestrator.core.hooks import RunHooks
from orchestrator.features.clarify import clarify_hooks
from orchestrator.features.risk import risk_hooks

__all__ = ["standalone_hooks"]


def standalone_hooks() -> RunHooks:
    """Clarification and risk estimates: every feature but memory."""
    return clarify_hooks() | risk_hooks()
