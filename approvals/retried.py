"""Whether a state-database operation runs again after a lost connection.

Whoever retries state-database operations (``orchestrator.core.state_patience``) runs every try
after the first inside ``trying_again()``: that try's earlier attempt may have committed before
its answer was lost, so a conditional write that finds its change already made may recognise it
as its own (the same row, the same values) rather than report a conflict. Outside a retry the
same finding is a conflict, as always.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["tried_again", "trying_again"]

_tried_again: ContextVar[bool] = ContextVar("sqlgate_state_tried_again", default=False)


@contextmanager
def trying_again(again: bool = True) -> Iterator[None]:
    """Mark the operation run inside as a try after a lost connection (its earlier try may have
    committed before the answer was lost); set by whoever retries state-database operations."""
    token = _tried_again.set(again or _tried_again.get())
    try:
        yield
    finally:
        _tried_again.reset(token)


def tried_again() -> bool:
    """True inside ``trying_again``: a write that finds its change already made may recognise
    it as its own (same row, same values) instead of reporting a conflict."""
    return _tried_again.get()
