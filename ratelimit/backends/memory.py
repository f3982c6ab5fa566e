"""In-process backend: threads and asyncio tasks of one process share it.

Each key's log keeps stamps in commit order with running totals of requests and tokens, so a
decision costs two binary searches per limit rather than a scan of the window.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time

from ratelimit.backends.base import Backend, Clock
from ratelimit.rules import Charge, Limits, Verdict, wait_until


class _Log:
    """A sliding-window log with running totals; entries before ``head`` stopped counting."""

    __slots__ = (
        "stamps",
        "expiries",
        "requests",
        "tokens",
        "ids",
        "head",
        "offset",
        "by_id",
        "paused_until",
    )

    def __init__(self) -> None:
        self.stamps: list[float] = []
        self.expiries: dict[float, list[float]] = {}  # window -> stamp + window, per entry
        self.requests: list[int] = []  # running totals, entry included
        self.tokens: list[int] = []
        self.ids: list[str] = []
        self.head = 0  # first entry that may still count
        self.offset = 0  # sequence number of stamps[0]
        self.by_id: dict[str, int] = {}  # grant id -> sequence number
        self.paused_until: float | None = None

    def append(self, stamp: float, requests: int, tokens: int, grant_id: str) -> None:
        if self.stamps and stamp < self.stamps[-1]:
            stamp = self.stamps[-1]  # a clock that stepped back must not reorder the log
        self.stamps.append(stamp)
        for window, expiries in self.expiries.items():
            expiries.append(stamp + window)
        self.requests.append((self.requests[-1] if self.requests else 0) + requests)
        self.tokens.append((self.tokens[-1] if self.tokens else 0) + tokens)
        self.ids.append(grant_id)
        self.by_id[grant_id] = self.offset + len(self.stamps) - 1

    def prune(self, now: float, keep: float) -> None:
        stamps, head = self.stamps, self.head
        while head < len(stamps) and stamps[head] + keep <= now:
            self.by_id.pop(self.ids[head], None)  # a refunded grant left by_id already
            head += 1
        self.head = head
        if head > 64 and head * 2 > len(stamps):
            base_r, base_t = self.requests[head - 1], self.tokens[head - 1]
            self.stamps = stamps[head:]
            self.expiries = {window: expiries[head:] for window, expiries in self.expiries.items()}
            self.requests = [r - base_r for r in self.requests[head:]]
            self.tokens = [t - base_t for t in self.tokens[head:]]
            self.ids = self.ids[head:]
            self.offset += head
            self.head = 0

    def decide(
        self, rules: Limits, charge: Charge, now: float
    ) -> tuple[bool, float, tuple[int, ...]]:
        """Same answer as :func:`ratelimit.rules.decide`, in O(log n) per limit."""
        stamps = self.stamps
        retry_at = now
        never = False
        used_all = []
        for rule in rules:
            totals = self.requests if rule.unit == "requests" else self.tokens
            window = rule.window
            expiries = self.expiries.get(window)
            if expiries is None:
                expiries = self.expiries[window] = [stamp + window for stamp in stamps]
            first = bisect.bisect_right(expiries, now, lo=self.head)
            base = totals[first - 1] if first > 0 else 0
            used = (totals[-1] if totals else 0) - base
            used_all.append(used)
            amount = charge.requests if rule.unit == "requests" else charge.tokens
            if amount > rule.limit:
                never = True
                continue
            excess = used + amount - rule.limit
            if excess > 0:
                last = bisect.bisect_left(totals, base + excess, lo=first)
                retry_at = max(retry_at, expiries[last])
        if self.paused_until is not None and self.paused_until > retry_at:
            retry_at = self.paused_until
        if never:
            return False, math.inf, tuple(used_all)
        if retry_at > now:
            return False, wait_until(now, retry_at), tuple(used_all)
        return True, 0.0, tuple(used_all)

    def correct(self, grant_id: str, tokens: int) -> bool:
        sequence = self.by_id.get(grant_id)
        if sequence is None:
            return False
        index = sequence - self.offset
        before = self.tokens[index - 1] if index > 0 else 0
        delta = tokens - (self.tokens[index] - before)
        for i in range(index, len(self.tokens)):
            self.tokens[i] += delta
        return True

    def refund(self, grant_id: str) -> bool:
        sequence = self.by_id.pop(grant_id, None)
        if sequence is None:
            return False
        index = sequence - self.offset
        for totals in (self.requests, self.tokens):
            before = totals[index - 1] if index > 0 else 0
            delta = totals[index] - before
            for i in range(index, len(totals)):
                totals[i] -= delta
        return True

    def __len__(self) -> int:
        return len(self.stamps) - self.head


class MemoryBackend(Backend):
    """Thread-safe sliding-window logs in a dict, pruned on every acquisition.

    Stamps come from the constructor's ``clock``, else the limiter's, else ``time.monotonic``,
    read while holding the lock, so the commit order is the stamp order.
    """

    name = "memory"
    blocking = False

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._logs: dict[str, _Log] = {}
        self._ids = itertools.count(1)

    def _log(self, key: str) -> _Log:
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _Log()
        return log

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        with self._lock:
            now = (self._clock or clock or time.monotonic)()
            log = self._log(key)
            log.prune(now, rules.longest_window)
            granted, retry_after, used = log.decide(rules, charge, now)
            if not granted:
                return Verdict(False, now, retry_after, None, used)
            grant_id = str(next(self._ids))
            log.append(now, charge.requests, charge.tokens, grant_id)
            return Verdict(True, now, 0.0, grant_id, used)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        with self._lock:
            now = (self._clock or clock or time.monotonic)()
            granted, retry_after, used = self._log(key).decide(rules, charge, now)
            return Verdict(granted, now, retry_after, None, used)

    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        with self._lock:
            until = (self._clock or clock or time.monotonic)() + seconds
            log = self._log(key)
            if log.paused_until is None or until > log.paused_until:
                log.paused_until = until

    def correct(self, key: str, grant_id: str, tokens: int, rules: Limits) -> bool:
        with self._lock:
            log = self._logs.get(key)
            return log.correct(grant_id, tokens) if log else False

    def refund(self, key: str, grant_id: str, rules: Limits) -> bool:
        with self._lock:
            log = self._logs.get(key)
            return log.refund(grant_id) if log else False

    def clear(self, key: str) -> None:
        with self._lock:
            self._logs.pop(key, None)

    def stored_entries(self, key: str) -> int:
        with self._lock:
            log = self._logs.get(key)
            return len(log) if log else 0
