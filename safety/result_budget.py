"""A byte budget on results: rows are fetched in small batches and counted in bytes as they come.

A row cap alone does not bound what sqlgate holds: 300 rows of ten megabytes each are 3 GB. The
executor and the sandbox workers therefore fetch through ``fetch_bounded``: it asks the cursor
(a server-side one on PostgreSQL and MariaDB/MySQL) for batches sized to what is left of the
budget, counts each row with ``row_bytes`` (an upper bound of its UTF-8 size), and stops at the
row that would go past ``max_bytes``. What it holds at most is the budget plus one batch, and a
batch is never larger than what the rows seen so far suggest half the remaining budget holds.
A single value still arrives whole from the driver: the budget bounds rows, not one value.
DuckDB's Python client materialises a result inside the engine before the first fetch (300 rows
of a megabyte held 300 MB there, measured); what bounds that is DuckDB's ``memory_limit`` and,
by default, the sandbox worker's address-space limit, while the budget bounds what sqlgate keeps
and passes on.

Example:
    >>> from itertools import islice
    >>> rows = iter([("a" * 10,), ("b" * 10,), ("c" * 10,)])
    >>> fetched = fetch_bounded(lambda n: list(islice(rows, n)), 10, 70)
    >>> len(fetched.rows), fetched.cut_by
    (2, 'bytes')
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "Fetched", "fetch_bounded", "row_bytes", "value_bytes"]

#: The default budget of one result: 64 MiB.
DEFAULT_MAX_RESULT_BYTES = 64 * 1024 * 1024
_VALUE_OVERHEAD = 8  # per value: what a container and its encoding add at least
_MAX_BATCH = 500


def value_bytes(value: Any) -> int:
    """An upper bound of the bytes ``value`` takes once encoded (UTF-8 text, JSON or pickle)."""
    if value is None or isinstance(value, bool):
        return _VALUE_OVERHEAD
    if isinstance(value, str):
        return _VALUE_OVERHEAD + (len(value) if value.isascii() else 4 * len(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _VALUE_OVERHEAD + 2 * len(value)  # shown as hex
    if isinstance(value, int):
        return _VALUE_OVERHEAD + value.bit_length() // 3 + 2
    if isinstance(value, (float, decimal.Decimal, uuid.UUID, dt.date, dt.time, dt.timedelta)):
        return _VALUE_OVERHEAD + 40
    if isinstance(value, dict):
        return _VALUE_OVERHEAD + sum(value_bytes(k) + value_bytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return _VALUE_OVERHEAD + sum(value_bytes(v) for v in value)
    return _VALUE_OVERHEAD + 4 * len(str(value))


def row_bytes(row: Sequence[Any]) -> int:
    """The bytes one row counts against the budget."""
    return _VALUE_OVERHEAD + sum(value_bytes(v) for v in row)


@dataclass
class Fetched:
    """Rows kept, their counted size, and what cut them (None: the whole result)."""

    rows: list[Any] = field(default_factory=list)
    size: int = 0
    cut_by: Literal["rows", "bytes"] | None = None

    @property
    def truncated(self) -> bool:
        return self.cut_by is not None


def fetch_bounded(
    fetchmany: Callable[[int], Sequence[Any]], row_cap: int, max_bytes: int
) -> Fetched:
    """At most ``row_cap`` rows and ``max_bytes`` counted bytes from ``fetchmany``.

    One row past ``row_cap`` is read to tell whether more existed (``cut_by="rows"``); the row
    that would pass ``max_bytes`` is dropped and the fetch stops there (``cut_by="bytes"``).
    """
    fetched = Fetched()
    batch = 1
    while True:
        want = min(batch, row_cap + 1 - len(fetched.rows))
        got = fetchmany(want)
        if not got:
            return fetched
        for row in got:
            if len(fetched.rows) == row_cap:
                fetched.cut_by = "rows"
                return fetched
            size = row_bytes(row)
            if fetched.size + size > max_bytes:
                fetched.cut_by = "bytes"
                return fetched
            fetched.rows.append(row)
            fetched.size += size
        if len(got) < want:
            return fetched
        average = fetched.size / max(1, len(fetched.rows))
        left = max_bytes - fetched.size
        batch = max(1, min(_MAX_BATCH, int(left / 2 / max(average, 1.0))))
