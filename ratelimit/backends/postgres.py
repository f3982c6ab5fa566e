"""PostgreSQL backend: processes on many hosts share a limiter through one database.

Each acquisition is one transaction that first takes a transaction-scoped advisory lock on the
key (``pg_advisory_xact_lock``), then reads the *server's* ``clock_timestamp()`` (not ``now()``,
which is the transaction's start, taken before the lock wait), decides and records. The lock is
held until commit, so acquisitions on one key are serialised and stamped in commit order by one
clock; clients' clocks are never read.
"""

from __future__ import annotations

import os
import threading
import uuid

import psycopg

from ratelimit.backends.base import Backend, Clock
from ratelimit.errors import BackendUnavailable
from ratelimit.rules import Charge, Limits, Verdict, decide, fits_now, usage_query

#: schema changes, applied in order once each; a new change is appended, never edited
MIGRATIONS: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS ratelimit_grants (
        key TEXT NOT NULL,
        grant_id TEXT NOT NULL,
        stamp DOUBLE PRECISION NOT NULL,
        requests INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        PRIMARY KEY (key, grant_id)
    )""",
    "CREATE INDEX IF NOT EXISTS ratelimit_grants_by_stamp ON ratelimit_grants (key, stamp)",
    "CREATE TABLE IF NOT EXISTS ratelimit_pauses (key TEXT PRIMARY KEY, until DOUBLE PRECISION NOT NULL)",
)

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('sqlgate.ratelimit:' || %s, 0))"
_SERVER_NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"


def libpq_url(url: str) -> str:
    """``postgresql+psycopg://…`` (SQLAlchemy style) to the ``postgresql://…`` psycopg expects.

    Example:
        >>> libpq_url("postgresql+psycopg://root@127.0.0.1:5432/test")
        'postgresql://root@127.0.0.1:5432/test'
    """
    scheme, sep, rest = url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest


class PostgresBackend(Backend):
    """Sliding-window logs in PostgreSQL, stamped by the server clock inside the transaction.

    Args:
        url: ``postgresql://…`` or ``postgresql+psycopg://…``.
        clock: stamp with this clock instead of the server's (virtual-clock tests only).
        connect_timeout: seconds before an unreachable server fails closed.
    """

    name = "postgres"
    blocking = True

    def __init__(self, url: str, *, clock: Clock | None = None, connect_timeout: float = 5.0) -> None:
        self.url = libpq_url(url)
        self._clock = clock
        self.connect_timeout = connect_timeout
        self._local = threading.local()
        self._all: list[tuple[int, psycopg.Connection]] = []
        self._all_lock = threading.Lock()
        self._ready = False

    def _connect(self) -> psycopg.Connection:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid() and not held[1].closed:
            return held[1]
        try:
            conn = psycopg.connect(self.url, connect_timeout=max(1, round(self.connect_timeout)))
        except psycopg.Error as exc:
            raise BackendUnavailable(self.name, str(exc).strip()) from exc
        self._local.held = (os.getpid(), conn)
        with self._all_lock:
            self._all.append((os.getpid(), conn))
        if not self._ready:
            self._migrate(conn)
        return conn

    def _migrate(self, conn: psycopg.Connection) -> None:
        def body(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('sqlgate.ratelimit.migrations', 0))")
            conn.execute("CREATE TABLE IF NOT EXISTS ratelimit_migrations (version INTEGER PRIMARY KEY)")
            done = conn.execute("SELECT COALESCE(MAX(version), -1) FROM ratelimit_migrations").fetchone()[0]
            for version, statement in enumerate(MIGRATIONS):
                if version > done:
                    conn.execute(statement)
                    conn.execute("INSERT INTO ratelimit_migrations (version) VALUES (%s)", (version,))

        self._run(body, conn)
        self._ready = True

    def setup(self) -> None:
        self._migrate(self._connect())

    def _run(self, body, conn: psycopg.Connection | None = None):  # type: ignore[no-untyped-def]
        conn = conn or self._connect()
        try:
            with conn.transaction():
                return body(conn)
        except psycopg.Error as exc:
            if conn.closed or conn.broken:
                self._local.held = None
            raise BackendUnavailable(self.name, str(exc).strip()) from exc

    def _now(self, conn: psycopg.Connection, clock: Clock | None) -> float:
        if self._clock is not None:
            return self._clock()
        return conn.execute(_SERVER_NOW).fetchone()[0]

    def _decide(self, conn, key, rules, charge, clock):  # type: ignore[no-untyped-def]
        conn.execute(_LOCK, (key,))
        now = self._now(conn, clock)  # after the lock: commit order is stamp order
        longest = rules.longest_window
        conn.execute(
            "DELETE FROM ratelimit_grants WHERE key = %s AND stamp <= %s AND stamp + %s <= %s",
            (key, now - longest + 1.0, longest, now),
        )
        row = conn.execute("SELECT until FROM ratelimit_pauses WHERE key = %s", (key,)).fetchone()
        paused_until = row[0] if row else None
        # fast path: the sums alone say whether it fits; rows are read only to time a refusal
        select, _ = usage_query(rules, "%s::float8")
        params = [value for rule in rules for value in (rule.window, now)]
        used = tuple(
            int(u) for u in conn.execute(f"SELECT {select} FROM ratelimit_grants WHERE key = %s", (*params, key)).fetchone()
        )
        if fits_now(rules, used, charge, now, paused_until):
            return now, (True, 0.0, used)
        entries = conn.execute(
            "SELECT stamp, requests, tokens FROM ratelimit_grants WHERE key = %s ORDER BY stamp", (key,)
        ).fetchall()
        return now, decide(entries, rules, charge, now, paused_until)

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        def body(conn: psycopg.Connection) -> Verdict:
            now, (granted, retry_after, used) = self._decide(conn, key, rules, charge, clock)
            if not granted:
                return Verdict(False, now, retry_after, None, used)
            grant_id = uuid.uuid4().hex
            conn.execute(
                "INSERT INTO ratelimit_grants (key, grant_id, stamp, requests, tokens) VALUES (%s, %s, %s, %s, %s)",
                (key, grant_id, now, charge.requests, charge.tokens),
            )
            return Verdict(True, now, 0.0, grant_id, used)

        return self._run(body)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        def body(conn: psycopg.Connection) -> Verdict:
            now, (granted, retry_after, used) = self._decide(conn, key, rules, charge, clock)
            return Verdict(granted, now, retry_after, None, used)

        return self._run(body)

    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        def body(conn: psycopg.Connection) -> None:
            conn.execute(_LOCK, (key,))
            until = self._now(conn, clock) + seconds
            conn.execute(
                "INSERT INTO ratelimit_pauses (key, until) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET until = GREATEST(ratelimit_pauses.until, EXCLUDED.until)",
                (key, until),
            )

        self._run(body)

    def correct(self, key: str, grant_id: str, tokens: int, rules: Limits) -> bool:
        def body(conn: psycopg.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE ratelimit_grants SET tokens = %s WHERE key = %s AND grant_id = %s", (tokens, key, grant_id)
            )
            return cursor.rowcount == 1

        return self._run(body)

    def clear(self, key: str) -> None:
        def body(conn: psycopg.Connection) -> None:
            conn.execute(_LOCK, (key,))
            conn.execute("DELETE FROM ratelimit_grants WHERE key = %s", (key,))
            conn.execute("DELETE FROM ratelimit_pauses WHERE key = %s", (key,))

        self._run(body)

    def stored_entries(self, key: str) -> int:
        return self._run(
            lambda conn: conn.execute("SELECT COUNT(*) FROM ratelimit_grants WHERE key = %s", (key,)).fetchone()[0]
        )

    def close(self) -> None:
        with self._all_lock:
            conns, self._all = self._all, []
        for pid, conn in conns:
            if pid != os.getpid():
                continue  # inherited through fork: the parent still uses it
            try:
                conn.close()
            except psycopg.Error:
                pass
        self._local = threading.local()
