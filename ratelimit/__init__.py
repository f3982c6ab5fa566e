"""Exact sliding-window rate limiting shared by threads, asyncio tasks, processes and hosts.

Floor: a library at the bottom, below ``orchestrator``; it imports none of sqlgate's other
packages (only ``sqlgate_exports``).

The promise: counting every acquisition at its commit stamp, no window of length ``W`` ever
holds more than ``N`` (per limit; requests and tokens are charged together or not at all).

- **One clock per budget.** A grant is stamped inside the backend's critical section: the
  limiter's clock for memory, the host clock inside ``BEGIN IMMEDIATE`` for a SQLite file, the
  server's ``clock_timestamp()`` after an advisory lock for PostgreSQL, Redis ``TIME`` inside a
  Lua script. Never a client clock read before a round trip, never a planned wake-up time.
- **Safety margin.** Callers see a grant a little after its commit. ``margin=`` lengthens the
  enforced windows so that requests leaving within ``margin`` of their commit keep the promise.
- **Fail-fast or wait.** Fail-fast raises :class:`RateLimitExceeded` with an exact
  ``retry_after`` (acquiring ``retry_after`` later succeeds if nobody else took the slot) and
  never sleeps; wait mode re-checks exactly when the needed slot frees, admits one limiter's
  waiters in arrival order, and gives up after ``max_wait``. A charge larger than a whole
  window raises :class:`CostExceedsLimit` at once.
- **Fail closed, in bounded time.** An unreachable, frozen or locked backend raises
  :class:`BackendUnavailable`, within the backend's ``timeout`` (2 s by default for
  PostgreSQL, whatever the server does; per round trip for Redis); nothing is ever admitted
  without a recorded grant. A SQLite file that is merely busy is retried, never refused.
- **Restarts.** A Redis restart that loses the data holds each key until one window after the
  server started, so grants from before and after the restart never share a window.
- **Admission control, feedback, visibility.** ``fits(n)`` says how long until a whole
  budget fits; ``pause(s)`` / ``pause_from_headers(h)`` hold every sharer after a provider 429;
  ``usages()`` gives each limit's usage and the next free slot.
- **Bounded storage.** Grants that count in no window are pruned on every acquisition.

Example:
    >>> from ratelimit import ManualClock, RequestLimit, SlidingWindowLimiter, TokenLimit
    >>> clock = ManualClock()
    >>> lim = SlidingWindowLimiter(limits=RequestLimit(5, 60.0) & TokenLimit(30_000, 60.0), clock=clock)
    >>> grant = lim.acquire(tokens=1_200)   # estimated before the call
    >>> lim.correct(grant, 950)             # corrected with the usage the reply reported
    True
    >>> [(u.unit, u.used) for u in lim.usages()]
    [('requests', 1), ('tokens', 950)]
    >>> clock.advance(10.0)
    >>> lim.fits(4), lim.fits(5)   # the seed pipeline's worst case (5 calls) fits in 50 s
    (0.0, 50.0)
"""

import typing as _typing

from sqlgate_exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from ratelimit.backends import (
        Backend,
        MemoryBackend,
        PostgresBackend,
        RedisBackend,
        SQLiteBackend,
    )
    from ratelimit.clock import ManualClock
    from ratelimit.errors import (
        BackendUnavailable,
        CostExceedsLimit,
        LimiterConfigError,
        RateLimitError,
        RateLimitExceeded,
    )
    from ratelimit.feedback import parse_duration, retry_after_from_headers
    from ratelimit.limiter import Grant, SlidingWindowLimiter, Usage
    from ratelimit.rules import Charge, Limit, Limits, RequestLimit, TokenLimit

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "Backend": "ratelimit.backends",
    "BackendUnavailable": "ratelimit.errors",
    "Charge": "ratelimit.rules",
    "CostExceedsLimit": "ratelimit.errors",
    "Grant": "ratelimit.limiter",
    "Limit": "ratelimit.rules",
    "LimiterConfigError": "ratelimit.errors",
    "Limits": "ratelimit.rules",
    "ManualClock": "ratelimit.clock",
    "MemoryBackend": "ratelimit.backends",
    "PostgresBackend": "ratelimit.backends",
    "RateLimitError": "ratelimit.errors",
    "RateLimitExceeded": "ratelimit.errors",
    "RedisBackend": "ratelimit.backends",
    "RequestLimit": "ratelimit.rules",
    "SQLiteBackend": "ratelimit.backends",
    "SlidingWindowLimiter": "ratelimit.limiter",
    "TokenLimit": "ratelimit.rules",
    "Usage": "ratelimit.limiter",
    "parse_duration": "ratelimit.feedback",
    "retry_after_from_headers": "ratelimit.feedback",
}

__all__ = [
    "Backend",
    "BackendUnavailable",
    "Charge",
    "CostExceedsLimit",
    "Grant",
    "Limit",
    "LimiterConfigError",
    "Limits",
    "ManualClock",
    "MemoryBackend",
    "PostgresBackend",
    "RateLimitError",
    "RateLimitExceeded",
    "RedisBackend",
    "RequestLimit",
    "SQLiteBackend",
    "SlidingWindowLimiter",
    "TokenLimit",
    "Usage",
    "parse_duration",
    "retry_after_from_headers",
]


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
