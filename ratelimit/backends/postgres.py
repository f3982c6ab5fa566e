"""PostgreSQL backend: processes on many hosts share a limiter through one database.

Each acquisition is one transaction that first takes a transaction-scoped advisory lock on the
key (``pg_advisory_xact_lock``), then, in the next statement (whose snapshot therefore sees every
earlier commit), reads the *server's* ``clock_timestamp()`` (not ``now()``, which is the
transaction's start, taken before the lock wait), prunes, and sums each limit's usage; then it
records and commits. The lock is held until commit, so acquisitions on one key are serialised
and stamped in commit order by one clock; clients' clocks are never read. Statements are
pipelined: two round trips per acquisition.
"""

from __future__ import annotations

import os
import threading
import uuid

import psycopg

from ratelimit.backends.base import Backend, Clock
from ratelimit.errors import BackendUnavailable
from ratelimit.rules import Charge, Limits, Verdict, decide, fits_now

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

    def __init__(
        self, url: str, *, clock: Clock | None = None, connect_timeout: float = 5.0
    ) -> None:
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
            conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            )
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
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('sqlgate.ratelimit.migrations', 0))"
            )
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
                        "INSERT INTO ratelimit_migrations (version) VALUES (%s)", (version,)
                    )

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

    def _read_sql(self, rules: Limits) -> str:
        now = (
            "%(now)s::float8"
            if self._clock is not None
            else "extract(epoch FROM clock_timestamp())::float8"
        )
        sums = ", ".join(
            f"COALESCE(SUM(CASE WHEN g.stamp + %(w{i})s::float8 > t.now THEN g.{rule.unit} ELSE 0 END), 0)::bigint"
            for i, rule in enumerate(rules)
        )
        # One statement, run after the lock statement so that its snapshot sees every earlier
        # commit: the clock reading, the pruning, the pause and each limit's usage at that reading.
        return f"""
            WITH t AS MATERIALIZED (SELECT {now} AS now),
            pruned AS (
                DELETE FROM ratelimit_grants d USING t
                WHERE d.key = %(key)s AND d.stamp <= t.now - %(longest)s::float8 + 1.0
                  AND d.stamp + %(longest)s::float8 <= t.now
            )
            SELECT t.now, (SELECT until FROM ratelimit_pauses WHERE key = %(key)s), {sums}
            FROM t LEFT JOIN ratelimit_grants g ON g.key = %(key)s
            GROUP BY t.now
        """

    def _decide(
        self, key: str, rules: Limits, charge: Charge, clock: Clock | None, record: bool
    ) -> Verdict:
        conn = self._connect()
        params: dict[str, object] = {"key": key, "longest": rules.longest_window}
        params.update({f"w{i}": rule.window for i, rule in enumerate(rules)})
        if self._clock is not None:
            params["now"] = self._clock()
        try:
            with conn.pipeline():  # BEGIN, lock, read: one round trip
                conn.execute("BEGIN")
                conn.execute(_LOCK, (key,))
                cursor = conn.execute(self._read_sql(rules), params)
            now, paused_until, *sums = cursor.fetchone()
            used = tuple(int(u) for u in sums)
            if fits_now(rules, used, charge, now, paused_until):
                granted, retry_after = True, 0.0
            else:  # time the refusal from the rows themselves
                entries = conn.execute(
                    "SELECT stamp, requests, tokens FROM ratelimit_grants WHERE key = %s ORDER BY stamp",
                    (key,),
                ).fetchall()
                granted, retry_after, used = decide(entries, rules, charge, now, paused_until)
            grant_id = uuid.uuid4().hex if granted and record else None
            with conn.pipeline():  # record and commit: one round trip
                if grant_id is not None:
                    conn.execute(
                        "INSERT INTO ratelimit_grants (key, grant_id, stamp, requests, tokens) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        (key, grant_id, now, charge.requests, charge.tokens),
                    )
                conn.execute("COMMIT")
        except psycopg.Error as exc:
            self._abandon(conn)
            raise BackendUnavailable(self.name, str(exc).strip()) from exc
        except BaseException:
            self._abandon(conn)
            raise
        return Verdict(granted, now, retry_after, grant_id, used)

    def _abandon(self, conn: psycopg.Connection) -> None:
        """Roll back after a failure; drop the connection if even that fails."""
        try:
            if (
                not conn.closed
                and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
            ):
                conn.execute("ROLLBACK")
        except psycopg.Error:
            self._local.held = None
            try:
                conn.close()
            except psycopg.Error:
                pass

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        return self._decide(key, rules, charge, clock, record=True)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        return self._decide(key, rules, charge, clock, record=False)

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
                "UPDATE ratelimit_grants SET tokens = %s WHERE key = %s AND grant_id = %s",
                (tokens, key, grant_id),
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
            lambda conn: conn.execute(
                "SELECT COUNT(*) FROM ratelimit_grants WHERE key = %s", (key,)
            ).fetchone()[0]
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
