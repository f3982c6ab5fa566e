"""SQLite-file backend: processes on one host share a limiter through one file.

Each acquisition is one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock
before anything is read. The host clock is read *inside* that transaction, so commits are
serialised and stamped in commit order by one clock (the host's ``time.time`` unless a clock is
given). Entries that no longer count in the longest window are deleted in the same transaction.

Contention alone never refuses a caller: a busy file is retried, after a short random pause,
until the lock is free or ``timeout`` seconds have passed (then :class:`BackendUnavailable`).
SQLite's own busy handler is not used: it backs off to sleeping 100 ms between tries, and a
sleeper that rarely tries loses the lock to callers in a tight loop, for as long as they keep
it busy. A failed try rolls back first, so a retried acquisition records nothing twice.

Example:
    >>> import tempfile, pathlib
    >>> from ratelimit import ManualClock, SlidingWindowLimiter
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "limits.sqlite"
    >>> backend = SQLiteBackend(path, clock=ManualClock(start=7.0))
    >>> SlidingWindowLimiter(limit=2, backend=backend).acquire().stamp
    7.0
    >>> backend.close()
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ratelimit.backends.base import Backend, Clock
from ratelimit.errors import BackendUnavailable
from ratelimit.rules import Charge, Limits, Verdict, decide, fits_now, usage_query

#: schema changes, applied in order once each; a new change is appended, never edited
MIGRATIONS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS ratelimit_grants (
        key TEXT NOT NULL,
        grant_id TEXT NOT NULL,
        stamp REAL NOT NULL,
        requests INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        PRIMARY KEY (key, grant_id)
    )""",
    "CREATE INDEX IF NOT EXISTS ratelimit_grants_by_stamp ON ratelimit_grants (key, stamp)",
    "CREATE TABLE IF NOT EXISTS ratelimit_pauses (key TEXT PRIMARY KEY, until REAL NOT NULL)",
)

_T = TypeVar("_T")

#: primary result codes of a file that is busy now but may be free in a moment
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


#: one lock per database file in this process: its threads take turns at the file's lock
_TURNS: dict[str, threading.Lock] = {}
_TURNS_GUARD = threading.Lock()


def _turn_for(name: str) -> threading.Lock:
    with _TURNS_GUARD:
        return _TURNS.setdefault(name, threading.Lock())


def _forget_turns() -> None:
    # a forked child has one thread: locks held by its parent's other threads never free
    global _TURNS_GUARD
    _TURNS.clear()
    _TURNS_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_forget_turns)


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(exc) or "busy" in str(exc)


class SQLiteBackend(Backend):
    """Sliding-window logs in a SQLite file shared by the processes of one host.

    Args:
        path: the database file (created if missing).
        clock: the stamping clock; default the host's ``time.time`` (comparable across
            processes and restarts). A forward step of the host clock shortens windows: keep
            the host clock slewed (NTP), not stepped.
        timeout: seconds a call keeps retrying a busy file before failing closed
            (a healthy peer holds the lock for well under a millisecond).
    """

    name = "sqlite"
    blocking = True

    def __init__(
        self, path: str | os.PathLike[str], *, clock: Clock | None = None, timeout: float = 5.0
    ) -> None:
        self.path = Path(path)
        self._lock_name = str(self.path.resolve())
        self._clock = clock
        self.timeout = timeout
        self._local = threading.local()
        self._all: list[tuple[int, sqlite3.Connection]] = []
        self._all_lock = threading.Lock()
        self._ready = False

    # -- connections --------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        try:
            # timeout=0: busy files are retried by _retrying, never by SQLite's busy handler
            conn = sqlite3.connect(
                self.path, timeout=0.0, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise BackendUnavailable(self.name, f"{self.path}: {exc}") from exc
        try:
            self._retrying(lambda: self._use_wal(conn))
        except BaseException:
            conn.close()
            raise
        self._local.held = (os.getpid(), conn)
        with self._all_lock:
            self._all.append((os.getpid(), conn))
        if not self._ready:
            self._retrying(lambda: self._migrate(conn))
        return conn

    @staticmethod
    def _use_wal(conn: sqlite3.Connection) -> None:
        # switching to WAL needs the file to itself: racing first openers retry until one did
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")

    def _retrying(self, attempt: Callable[[], _T]) -> _T:
        """Run ``attempt`` until it is not refused by a busy file, for at most ``timeout`` s.

        The threads of one process take turns first (a lock per file and process), so the
        file's lock is wanted by one caller per process, not by every thread. Pauses between
        tries are short and random (up to 0.2 ms, growing to 2 ms) so that waiting callers in
        several processes keep trying often and do not fall into step with each other.
        """
        deadline = time.monotonic() + self.timeout
        turn = _turn_for(self._lock_name)
        if not turn.acquire(timeout=self.timeout):
            raise BackendUnavailable(
                self.name, f"{self.path}: this process's callers still queued after "
                f"{self.timeout:g} s"
            )  # fmt: skip
        try:
            pause = 0.0002
            while True:
                try:
                    return attempt()
                except sqlite3.Error as exc:
                    if not _is_busy(exc):
                        raise BackendUnavailable(self.name, f"{self.path}: {exc}") from exc
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise BackendUnavailable(
                            self.name, f"{self.path}: {exc} (still busy after {self.timeout:g} s)"
                        ) from exc
                    time.sleep(min(left, random.uniform(0.0, pause)))
                    pause = min(pause * 1.5, 0.002)
        finally:
            turn.release()

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ratelimit_migrations (version INTEGER PRIMARY KEY)"
            )
            done = conn.execute(
                "SELECT COALESCE(MAX(version), -1) FROM ratelimit_migrations"
            ).fetchone()[0]
            for version, statement in enumerate(MIGRATIONS):
                if version > done:
                    conn.execute(statement)
                    conn.execute(
                        "INSERT INTO ratelimit_migrations (version) VALUES (?)", (version,)
                    )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._ready = True

    def setup(self) -> None:
        conn = self._connect()
        self._retrying(lambda: self._migrate(conn))

    def _now(self, clock: Clock | None) -> float:
        # processes share this file, so only the backend's own clock stamps, never a limiter's
        return (self._clock or time.time)()

    def _transaction(self, body: Callable[[sqlite3.Connection], _T]) -> _T:
        conn = self._connect()

        def attempt() -> _T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = body(conn)
                conn.execute("COMMIT")
                return result
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        return self._retrying(attempt)

    # -- the log ------------------------------------------------------------------------------

    def _decide(
        self, conn: sqlite3.Connection, key: str, rules: Limits, charge: Charge, now: float
    ) -> tuple[bool, float, tuple[int, ...]]:
        longest = rules.longest_window
        conn.execute(
            "DELETE FROM ratelimit_grants WHERE key = ? AND stamp <= ? AND stamp + ? <= ?",
            (key, now - longest + 1.0, longest, now),
        )
        row = conn.execute("SELECT until FROM ratelimit_pauses WHERE key = ?", (key,)).fetchone()
        paused_until = row[0] if row else None
        # fast path: the sums alone say whether it fits; rows are read only to time a refusal
        select, _ = usage_query(rules, "?")
        params = [value for rule in rules for value in (rule.window, now)]
        used = tuple(
            conn.execute(
                f"SELECT {select} FROM ratelimit_grants WHERE key = ?", (*params, key)
            ).fetchone()
        )
        if fits_now(rules, used, charge, now, paused_until):
            return True, 0.0, used
        entries = conn.execute(
            "SELECT stamp, requests, tokens FROM ratelimit_grants WHERE key = ? ORDER BY stamp",
            (key,),
        ).fetchall()
        return decide(entries, rules, charge, now, paused_until)

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        def body(conn: sqlite3.Connection) -> Verdict:
            now = self._now(clock)  # read inside the exclusive transaction
            granted, retry_after, used = self._decide(conn, key, rules, charge, now)
            if not granted:
                return Verdict(False, now, retry_after, None, used)
            grant_id = uuid.uuid4().hex
            conn.execute(
                "INSERT INTO ratelimit_grants (key, grant_id, stamp, requests, tokens) VALUES (?, ?, ?, ?, ?)",
                (key, grant_id, now, charge.requests, charge.tokens),
            )
            return Verdict(True, now, 0.0, grant_id, used)

        return self._transaction(body)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        def body(conn: sqlite3.Connection) -> Verdict:
            now = self._now(clock)
            granted, retry_after, used = self._decide(conn, key, rules, charge, now)
            return Verdict(granted, now, retry_after, None, used)

        return self._transaction(body)

    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        def body(conn: sqlite3.Connection) -> None:
            until = self._now(clock) + seconds
            conn.execute(
                "INSERT INTO ratelimit_pauses (key, until) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET until = MAX(until, excluded.until)",
                (key, until),
            )

        self._transaction(body)

    def correct(self, key: str, grant_id: str, tokens: int, rules: Limits) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE ratelimit_grants SET tokens = ? WHERE key = ? AND grant_id = ?",
                (tokens, key, grant_id),
            )
            return cursor.rowcount == 1

        return self._transaction(body)

    def refund(self, key: str, grant_id: str, rules: Limits) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM ratelimit_grants WHERE key = ? AND grant_id = ?", (key, grant_id)
            )
            return cursor.rowcount == 1

        return self._transaction(body)

    def clear(self, key: str) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM ratelimit_grants WHERE key = ?", (key,))
            conn.execute("DELETE FROM ratelimit_pauses WHERE key = ?", (key,))

        self._transaction(body)

    def stored_entries(self, key: str) -> int:
        conn = self._connect()
        return self._retrying(
            lambda: int(
                conn.execute(
                    "SELECT COUNT(*) FROM ratelimit_grants WHERE key = ?", (key,)
                ).fetchone()[0]
            )
        )

    def close(self) -> None:
        with self._all_lock:
            conns, self._all = self._all, []
        for pid, conn in conns:
            if pid != os.getpid():
                continue  # inherited through fork: the parent still uses it
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()
