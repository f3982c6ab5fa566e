"""``memory_for``: the one place an entry point gets its reviewed-SQL memory.

Every entry point that builds a pipeline (``sqlgate ask``/``batch``/``resume``/``runs recover``,
the HTTP server, the MCP server, the Celery worker) passes
``hooks=run_hooks(memory_for(state, policy))`` (``orchestrator.wiring``).
Memory lives in the state database; the policy file's ``[auto_approval]`` section (off unless
``enabled = true``) says when reviews earn auto-approval.

``SQLGATE_MEMORY`` chooses what memory does:

- ``on`` (default): record reviewed statements, and give similar reviewed examples to the SQL
  step and matching business notes to the reasoning step;
- ``record``: record, but put nothing into prompts;
- ``off``: no memory at all (nothing recorded, nothing retrieved, no earned auto-approval).

Example:
    >>> from orchestrator.core.state_db import StateDatabase
    >>> memory_for(StateDatabase("sqlite://"), environ={"SQLGATE_MEMORY": "record"}).settings.examples_per_question
    0
    >>> memory_for(StateDatabase("sqlite://"), environ={"SQLGATE_MEMORY": "off"}) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from approvals.policy import EarnedApprovalRule
from orchestrator.core.errors import ConfigurationError
from orchestrator.features.memory.review_memory import MemorySettings, ReviewMemory
from safety import Policy

if TYPE_CHECKING:
    from orchestrator.core.state_db import StateDatabase

__all__ = ["MEMORY_ENV", "MEMORY_MODES", "memory_for", "memory_settings"]

MEMORY_ENV = "SQLGATE_MEMORY"
MEMORY_MODES = ("on", "record", "off")


def _mode(environ: Mapping[str, str] | None) -> str:
    env = os.environ if environ is None else environ
    mode = (env.get(MEMORY_ENV) or "on").strip().lower()
    if mode not in MEMORY_MODES:
        raise ConfigurationError(
            f"{MEMORY_ENV}={mode!r} is not one of {', '.join(MEMORY_MODES)} (default on)"
        )
    return mode


def memory_settings(policy: Policy | None = None, *, retrieve: bool = True) -> MemorySettings:
    """Memory settings with the auto-approval rule of ``policy`` (off without a policy)."""
    rule = EarnedApprovalRule()
    if policy is not None:
        rule = EarnedApprovalRule.model_validate(policy.auto_approval.model_dump())
    if not retrieve:
        return MemorySettings(examples_per_question=0, notes_per_question=0, auto_approval=rule)
    return MemorySettings(auto_approval=rule)


def memory_for(
    state: StateDatabase | None = None,
    policy: Policy | object | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ReviewMemory | None:
    """The pipeline's memory on ``state`` (default: the configured state database), or None
    when ``SQLGATE_MEMORY=off``. Raises ``ConfigurationError`` for an unknown mode.

    ``policy`` is the policy file (``safety.Policy``) or an object that carries one as
    ``.policy`` (the opened target database, when it was opened with a policy file); without
    one, earned auto-approval stays off.
    """
    if policy is not None and not isinstance(policy, Policy):
        policy = getattr(policy, "policy", None)
    mode = _mode(environ)
    if mode == "off":
        return None
    if state is None:
        from orchestrator.core.state_db import StateDatabase

        state = StateDatabase()
    from orchestrator.features.memory.store import MemoryStore

    store = state.store(MemoryStore)
    store.setup()
    chosen = policy if isinstance(policy, Policy) else None
    return ReviewMemory(store, memory_settings(chosen, retrieve=mode == "on"))
