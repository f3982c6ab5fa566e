"""Checking a set of grants against the sliding-window promise."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from itertools import accumulate


def max_in_window(
    stamps: Iterable[float], window: float, amounts: Iterable[int] | None = None
) -> int:
    """The largest total of grants that count together at any instant.

    A grant stamped ``s`` counts during ``[s, s + window)``; the total peaks at some grant's
    stamp, so checking every stamp covers every window of length ``window``. The test
    ``s + window > now`` is evaluated in floating point exactly as the backends evaluate it.

    Example:
        >>> max_in_window([0.0, 0.5, 1.0, 1.0, 2.5], 1.0)
        3
        >>> max_in_window([0.0, 1.0], 1.0, amounts=[3, 4])
        4
    """
    stamps = list(stamps)
    amounts = list(amounts) if amounts is not None else [1] * len(stamps)
    pairs = sorted(zip(stamps, amounts, strict=True))
    ordered = [s for s, _ in pairs]
    totals = [0, *accumulate(a for _, a in pairs)]
    best = 0
    for now in ordered:
        last = bisect_right(ordered, now)  # grants with s <= now
        first = bisect_left(ordered, True, hi=last, key=lambda s, now=now: s + window > now)
        best = max(best, totals[last] - totals[first])
    return best
