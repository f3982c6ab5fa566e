"""The storage interface every limiter backend implements.

A backend owns the atomic check-and-record: it reads its clock *inside* its critical section
(lock, exclusive transaction or server-side script), decides with :func:`ratelimit.rules.decide`
(or the same rule in the server's language), and records the grant stamped with that reading.
Nothing is recorded on refusal, so a refused or cancelled caller leaves no stamp.

Clocks: ``clock`` passed to a method is the limiter's injected clock, or ``None``. Only the memory
backend, private to one process, stamps with it (unless its constructor was given a clock).
Shared backends stamp with one clock of their own, whatever clock each sharing process's limiter
has: the host's for SQLite, the server's for PostgreSQL and Redis. Their constructors accept a
``clock`` to replace it, for virtual-clock tests and replays.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from ratelimit.rules import Charge, Limits, Verdict

Clock = Callable[[], float]


class Backend(ABC):
    """Storage for sliding-window logs, one log per key."""

    #: a short name for messages ("memory", "sqlite", ...)
    name: str = "backend"
    #: True when calls do network or file I/O (the async API then runs them in a worker thread)
    blocking: bool = False

    def setup(self) -> None:  # noqa: B027 - optional hook; a backend needing nothing keeps the no-op
        """Create what the backend needs; safe to call more than once."""

    @abstractmethod
    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        """Atomically admit and record ``charge``, or refuse it and record nothing."""

    @abstractmethod
    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        """Decide ``charge`` as :meth:`acquire` would, without recording it."""

    @abstractmethod
    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        """Admit nobody on ``key`` for ``seconds`` from now (extends, never shortens, a pause)."""

    @abstractmethod
    def correct(self, key: str, grant_id: str, tokens: int, rules: Limits) -> bool:
        """Replace a recorded grant's token estimate with the real figure (``rules``: the limits
        it was granted under).

        Returns False when the grant is no longer stored (it already stopped counting).
        """

    @abstractmethod
    def refund(self, key: str, grant_id: str, rules: Limits) -> bool:
        """Forget a recorded grant, as if it had never been admitted: for a request that never
        reached the endpoint (the connection was refused), so that nothing was spent.

        Returns False when the grant is no longer stored (it already stopped counting).
        """

    @abstractmethod
    def clear(self, key: str) -> None:
        """Forget every grant and pause of ``key``."""

    @abstractmethod
    def stored_entries(self, key: str) -> int:
        """How many grants are stored for ``key`` (storage is pruned, so this stays bounded)."""

    def close(self) -> None:  # noqa: B027 - optional hook; a backend holding nothing keeps the no-op
        """Release connections; the backend may not be used afterwards."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
