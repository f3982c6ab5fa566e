"""Exact sliding-window rate limiting shared by threads, asyncio tasks and processes.

Example:
    >>> from ratelimit import SlidingWindowLimiter
    >>> lim = SlidingWindowLimiter(limit=5, window=60.0)
    >>> lim.acquire().requests
    1
    >>> lim.usage().used
    1
"""

from ratelimit.backends import Backend, MemoryBackend, PostgresBackend, RedisBackend, SQLiteBackend
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
