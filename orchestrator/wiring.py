"""The composition root: which features a run gets, and which stores the state database keeps.

The core (``orchestrator.core``) owns no feature: it calls the hooks a pipeline is given
(``RunHooks``) and migrates the stores registered with the state database. Every entry point
that builds a pipeline (``sqlgate ask``/``batch``/``resume``/``runs recover``/``eval``/``demo``,
the HTTP server, the MCP server, the Celery worker) takes its hooks from ``run_hooks`` and its
state database from ``state_database``, so a feature is plugged in once, here, for all of them.

A new feature is one module in ``orchestrator/features`` that returns its ``RunHooks``, and one
line in ``run_hooks`` (see the README's "Adding a feature").

Example:
    >>> hooks = run_hooks()  # no memory: clarification and risk estimates
    >>> hooks.answered is not None and hooks.assess is not None and hooks.examples is None
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.core.hooks import RunHooks
from orchestrator.core.state_db import StateDatabase, register_store

if TYPE_CHECKING:
    from orchestrator.core.state_patience import StatePatience
    from orchestrator.features.memory import ReviewMemory

__all__ = ["run_hooks", "state_database", "wire"]


def wire() -> None:
    """Register the features' stores with the state database (safe to call again): reviewed-SQL
    memory (``memory``) and the notification outbox (``notifications``)."""
    from orchestrator.features.memory.store import MemoryStore
    from orchestrator.features.notify.outbox import NotificationStore

    register_store("memory", MemoryStore)
    register_store("notifications", NotificationStore)


def run_hooks(memory: ReviewMemory | None = None) -> RunHooks:
    """Every feature's hooks for one pipeline: clarification (a follow-up's answers), the risk
    estimate before review, and, with ``memory`` (``memory_for``), notes, examples, earned
    auto-approval and what reviewers decided."""
    from orchestrator.features.clarify import clarify_hooks
    from orchestrator.features.memory.hooks import memory_hooks
    from orchestrator.features.risk import risk_hooks

    return clarify_hooks() | risk_hooks() | memory_hooks(memory)


def state_database(
    url: str | None = None, *, patience: StatePatience | None = None
) -> StateDatabase:
    """The state database at ``url`` (default: the configured one) with the features' stores
    registered."""
    wire()
    return StateDatabase(url, patience=patience)
