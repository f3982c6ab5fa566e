"""Checking a set of grants against the sliding-window promise."""

from __future__ import annotations

from collections.abc import Iterable


def max_in_window(
    stamps: Iterable[float], window: float, amounts: Iterable[int] | None = None
) -> int:
    """The largest total of grants that count together at any instant.

    A grant stamped ``s`` counts during ``[s, s + window)``; the total peaks at some grant's
    stamp, so checking every stamp covers every window of length ``window``.
    """
    stamps = list(stamps)
    amounts = list(amounts) if amounts is not None else [1] * len(stamps)
    pairs = sorted(zip(stamps, amounts, strict=True))
    best = 0
    for now, _ in pairs:
        total = sum(a for s, a in pairs if s <= now and s + window > now)
        best = max(best, total)
    return best
