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

from ratelimit.backends.base import Backend
from ratelimit.backends.memory import MemoryBackend
from ratelimit.backends.postgres import PostgresBackend
from ratelimit.backends.redis import RedisBackend
from ratelimit.backends.sqlite import SQLiteBackend

__all__ = ["Backend", "MemoryBackend", "PostgresBackend", "RedisBackend", "SQLiteBackend"]
