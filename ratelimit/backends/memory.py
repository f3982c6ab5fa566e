"""In-process backend: threads and asyncio tasks of one process share it."""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ratelimit.backends.base import Backend, Clock
from ratelimit.rules import Charge, Limits, Verdict, decide


@dataclass
class _Log:
    entries: deque[list] = field(default_factory=deque)  # [stamp, requests, tokens, grant_id]
    by_id: dict[str, list] = field(default_factory=dict)
    paused_until: float | None = None


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

    def _now(self, clock: Clock | None) -> float:
        return (self._clock or clock or time.monotonic)()

    def _log(self, key: str) -> _Log:
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = _Log()
        return log

    @staticmethod
    def _prune(log: _Log, now: float, keep: float) -> None:
        entries = log.entries
        while entries and entries[0][0] + keep <= now:
            del log.by_id[entries.popleft()[3]]

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        with self._lock:
            now = self._now(clock)
            log = self._log(key)
            self._prune(log, now, rules.longest_window)
            granted, retry_after, used = decide(log.entries, rules, charge, now, log.paused_until)
            if not granted:
                return Verdict(False, now, retry_after, None, used)
            grant_id = str(next(self._ids))
            entry = [now, charge.requests, charge.tokens, grant_id]
            log.entries.append(entry)
            log.by_id[grant_id] = entry
            return Verdict(True, now, 0.0, grant_id, used)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        with self._lock:
            now = self._now(clock)
            log = self._logs.get(key) or _Log()
            granted, retry_after, used = decide(log.entries, rules, charge, now, log.paused_until)
            return Verdict(granted, now, retry_after, None, used)

    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        with self._lock:
            until = self._now(clock) + seconds
            log = self._log(key)
            if log.paused_until is None or until > log.paused_until:
                log.paused_until = until

    def correct(self, key: str, grant_id: str, tokens: int) -> bool:
        with self._lock:
            log = self._logs.get(key)
            entry = log.by_id.get(grant_id) if log else None
            if entry is None:
                return False
            entry[2] = tokens
            return True

    def clear(self, key: str) -> None:
        with self._lock:
            self._logs.pop(key, None)

    def stored_entries(self, key: str) -> int:
        with self._lock:
            log = self._logs.get(key)
            return len(log.entries) if log else 0
