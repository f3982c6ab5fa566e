"""Clocks for the limiter: a virtual clock for replays and tests.

Real runs use ``time.monotonic`` / ``time.sleep`` (memory backend) or the shared backend's own
clock. :class:`ManualClock` is a virtual clock whose ``sleep`` advances time instantly, so a
schedule of thousands of acquisitions replays in milliseconds with exact waits.

Example:
    >>> clock = ManualClock(start=10.0)
    >>> clock()
    10.0
    >>> clock.sleep(5)
    >>> clock()
    15.0
    >>> clock.slept
    [5.0]
"""

from __future__ import annotations

import asyncio
import threading


class ManualClock:
    """A thread-safe virtual clock: reading it is ``clock()``, ``sleep(s)`` advances it by ``s``.

    ``slept`` records every sleep asked for, in order, so tests can assert exact waits.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def now(self) -> float:
        """The current virtual time."""
        return self()

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` without recording a sleep."""
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        with self._lock:
            self._now += float(seconds)

    def set(self, when: float) -> None:
        """Jump to ``when`` (never backwards)."""
        with self._lock:
            if when < self._now:
                raise ValueError("a clock cannot go backwards")
            self._now = float(when)

    def sleep(self, seconds: float) -> None:
        """Advance time by ``seconds`` at once and record the sleep."""
        if seconds < 0:
            raise ValueError("cannot sleep a negative time")
        with self._lock:
            self.slept.append(float(seconds))
            self._now += float(seconds)

    async def asleep(self, seconds: float) -> None:
        """Async twin of :meth:`sleep`; yields to the event loop once."""
        self.sleep(seconds)
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"ManualClock(now={self():g})"
