"""Storage backends for the sliding-window limiter.

=========  ============================  ======================================================
backend    shared by                     stamping clock (read inside the critical section)
=========  ============================  ======================================================
memory     threads, tasks of a process   the limiter's clock (default ``time.monotonic``)
sqlite     processes on one host         the host's ``time.time`` inside ``BEGIN IMMEDIATE``
postgres   processes on many hosts       server ``clock_timestamp()`` after an advisory lock
redis      processes on many hosts       server ``TIME`` inside a Lua script
=========  ============================  ======================================================
"""

import typing as _typing

from sqlgate_exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from ratelimit.backends.base import Backend
    from ratelimit.backends.memory import MemoryBackend
    from ratelimit.backends.postgres import PostgresBackend
    from ratelimit.backends.redis import RedisBackend
    from ratelimit.backends.sqlite import SQLiteBackend

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "Backend": "ratelimit.backends.base",
    "MemoryBackend": "ratelimit.backends.memory",
    "PostgresBackend": "ratelimit.backends.postgres",
    "RedisBackend": "ratelimit.backends.redis",
    "SQLiteBackend": "ratelimit.backends.sqlite",
}

__all__ = ["Backend", "MemoryBackend", "PostgresBackend", "RedisBackend", "SQLiteBackend"]


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
