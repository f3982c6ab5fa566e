"""SQLite's ``REGEXP`` operator backed by RE2, whose matching time is linear in the input.

SQLAlchemy's pysqlite dialect registers Python's ``re`` as ``regexp`` on every connection. ``re``
backtracks: a pattern like ``(a+)+$`` on a long string runs for minutes while holding the GIL, so
one query freezes every thread of the process. sqlgate's read-only SQLite connections replace it
with RE2 (no backreferences, no lookaround; matching time bounded by pattern size x input size),
with a cap on the pattern's length and on the memory RE2 may use to compile it.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable

import re2

__all__ = ["MAX_PATTERN_BYTES", "install_regexp", "re2_regexp"]

MAX_PATTERN_BYTES = 1024
_RE2_MAX_MEM = 8 * 1024 * 1024  # compiled-program budget; RE2 refuses a pattern that needs more


def re2_regexp(
    max_pattern_bytes: int = MAX_PATTERN_BYTES,
) -> Callable[[object, object], bool | None]:
    """A ``regexp(pattern, value)`` function for ``sqlite3.Connection.create_function``.

    SQLite turns ``value REGEXP pattern`` into ``regexp(pattern, value)``; NULL on either side
    gives NULL, as for every other SQL comparison.

    Example:
        >>> regexp = re2_regexp()
        >>> regexp("^ab+c$", "abbbc"), regexp("(a+)+$", "a" * 100_000 + "b"), regexp("x", None)
        (True, False, None)
    """
    options = re2.Options()
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False

    @functools.lru_cache(maxsize=64)
    def compiled(pattern: str) -> re2._Regexp:
        if len(pattern.encode("utf-8")) > max_pattern_bytes:
            raise ValueError(f"REGEXP pattern longer than {max_pattern_bytes} bytes")
        try:
            return re2.compile(pattern, options)
        except re2.error as exc:
            raise ValueError(f"REGEXP pattern refused by RE2: {exc}") from None

    def regexp(pattern: object, value: object) -> bool | None:
        if pattern is None or value is None:
            return None
        return compiled(str(pattern)).search(str(value)) is not None

    return regexp


def install_regexp(
    conn: sqlite3.Connection, max_pattern_bytes: int = MAX_PATTERN_BYTES
) -> sqlite3.Connection:
    """Register (or re-register over SQLAlchemy's) the RE2 ``regexp`` on ``conn``."""
    conn.create_function("regexp", 2, re2_regexp(max_pattern_bytes), deterministic=True)
    return conn
