"""PostgreSQL backend: processes on many hosts share a limiter through one database.

Every call returns or raises :class:`BackendUnavailable` within ``timeout`` seconds (default
2), whatever the server or the network does: the connection is opened under that deadline, the
server cancels a lock wait or a statement that takes too long (``lock_timeout``,
``statement_timeout``), TCP keepalives and ``tcp_user_timeout`` notice a dead peer, and a
watchdog shuts the socket of a call whose server stopped answering altogether (a frozen
process still has its TCP handshakes and acknowledgements done by the kernel, so only the
client's own deadline notices it). A session that stops mid-transaction is ended by the server
(``idle_in_transaction_session_timeout``), so it cannot keep a key locked.

Each acquisition is one transaction that first takes a transaction-scoped advisory lock on the
key (``pg_advisory_xact_lock``), then, in the next statement (whose snapshot therefore sees every
earlier commit), reads the *server's* ``clock_timestamp()`` (not ``now()``, which is the
transaction's start, taken before the lock wait), prunes, and sums each limit's usage; then it
records and commits. The lock is held until commit, so acquisitions on one key are serialised
and stamped in commit order by one clock; clients' clocks are never read. Statements are
pipelined: two round trips per acquisition.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ratelimit.backends.base import Backend, Clock
from ratelimit.backends.watchdog import SocketWatchdog
from ratelimit.errors import BackendUnavailable, LimiterConfigError
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

_T = TypeVar("_T")

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
        timeout: the bound, in seconds, on every call, connecting included: it returns or
            raises :class:`BackendUnavailable` within this long (its deadline is set a tenth
            earlier, at most 0.1 s, to leave room for the watchdog's 50 ms poll). Default 2.
        application_name: how the sessions show in ``pg_stat_activity``.
    """

    name = "postgres"
    blocking = True

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        timeout: float = 2.0,
        application_name: str = "sqlgate-ratelimit",
    ) -> None:
        if not (timeout > 0 and math.isfinite(timeout)):
            raise LimiterConfigError(
                f"timeout must be a finite number of seconds > 0, got {timeout!r}"
            )
        self.url = libpq_url(url)
        self._clock = clock
        self.timeout = float(timeout)
        self.application_name = application_name
        self._local = threading.local()
        self._all: list[tuple[int, psycopg.Connection]] = []
        self._all_lock = threading.Lock()
        self._ready = False
        self._watchdog = SocketWatchdog()

    def _session_options(self) -> str:
        """Server-side limits of every session: the server itself gives up well within the bound."""
        bound_ms = max(1, int(self.timeout * 1000))
        # the lock wait gives up first, so a held key reads as such in the error
        lock_ms, statement_ms = max(1, bound_ms * 2 // 5), max(2, bound_ms * 3 // 5)
        given = conninfo_to_dict(self.url).get("options") or ""
        return " ".join(
            part
            for part in (
                str(given),
                f"-c lock_timeout={lock_ms}",
                f"-c statement_timeout={statement_ms}",
                f"-c idle_in_transaction_session_timeout={max(1000, 5 * bound_ms)}",
            )
            if part
        )

    def _open(self, deadline: float) -> psycopg.Connection:
        """A new connection, or :class:`BackendUnavailable` once ``deadline`` passes.

        libpq's own ``connect_timeout`` counts whole seconds (at least 2) per attempt, so the
        connection is opened on a helper thread and abandoned (closed when it finally
        completes) if the deadline passes first.
        """
        seconds = max(1, math.ceil(self.timeout))
        params: dict[str, object] = {
            "autocommit": True,
            "connect_timeout": max(2, seconds),
            "application_name": self.application_name,
            "options": self._session_options(),
            "keepalives": 1,
            "keepalives_idle": seconds,
            "keepalives_interval": 1,
            "keepalives_count": 2,
            "tcp_user_timeout": max(1, int(self.timeout * 1000)),
        }
        outcome: list[psycopg.Connection | BaseException] = []
        lock = threading.Lock()
        abandoned = False

        def connect() -> None:
            try:
                conn: psycopg.Connection | BaseException = psycopg.connect(self.url, **params)  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the caller below
                conn = exc
            with lock:
                if not abandoned:
                    outcome.append(conn)
                    return
            if isinstance(conn, psycopg.Connection):
                conn.close()

        helper = threading.Thread(target=connect, name="sqlgate-ratelimit-connect", daemon=True)
        helper.start()
        helper.join(max(0.0, deadline - time.monotonic()))
        with lock:
            if not outcome:
                abandoned = True
                raise BackendUnavailable(self.name, f"could not connect within {self.timeout:g} s")
        result = outcome[0]
        if isinstance(result, psycopg.Error):
            raise BackendUnavailable(self.name, str(result).strip()) from result
        if isinstance(result, BaseException):
            raise result
        return result

    def _connect(self, deadline: float) -> psycopg.Connection:
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid() and not held[1].closed:
            conn: psycopg.Connection = held[1]
            return conn
        conn = self._open(deadline)
        self._local.held = (os.getpid(), conn)
        with self._all_lock:
            self._all.append((os.getpid(), conn))
        return conn

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection]:
        """This thread's connection, with the call's deadline armed on it.

        Any driver error becomes :class:`BackendUnavailable`; whatever transaction is open is
        rolled back (under the same deadline), and a connection in doubt is dropped.
        """
        deadline = time.monotonic() + self.timeout - min(0.1, self.timeout / 10)
        conn = self._connect(deadline)
        if not self._ready:
            self._migrate(conn, deadline)
            conn = self._connect(deadline)  # a new one if the migration's was dropped
        token = self._watchdog.arm(deadline, conn.fileno())
        try:
            yield conn
        except psycopg.Error as exc:
            self._abandon(conn)
            fired = self._watchdog.disarm(token)
            if fired:
                self._drop(conn)
                detail = f"no answer within {self.timeout:g} s ({str(exc).strip()})"
            else:
                detail = str(exc).strip()
            raise BackendUnavailable(self.name, detail) from exc
        except BaseException:
            self._abandon(conn)
            if self._watchdog.disarm(token):
                self._drop(conn)
            raise
        else:
            if self._watchdog.disarm(token):
                self._drop(conn)  # answered just in time, but the socket is shut now

    def _migrate(self, conn: psycopg.Connection, deadline: float) -> None:
        token = self._watchdog.arm(deadline, conn.fileno())
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended('sqlgate.ratelimit.migrations', 0))"
                )
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS ratelimit_migrations (version INTEGER PRIMARY KEY)"
                )
                row = conn.execute(
                    "SELECT COALESCE(MAX(version), -1) FROM ratelimit_migrations"
                ).fetchone()
                done = row[0] if row else -1
                for version, statement in enumerate(MIGRATIONS):
                    if version > done:
                        conn.execute(statement)
                        conn.execute(
                            "INSERT INTO ratelimit_migrations (version) VALUES (%s)", (version,)
                        )
        except psycopg.Error as exc:
            self._abandon(conn)
            if self._watchdog.disarm(token):
                self._drop(conn)
            raise BackendUnavailable(self.name, str(exc).strip()) from exc
        if self._watchdog.disarm(token):
            self._drop(conn)
        self._ready = True

    def setup(self) -> None:
        with self._session():
            pass

    def _run(self, body: Callable[[psycopg.Connection], _T]) -> _T:
        with self._session() as conn, conn.transaction():
            return body(conn)

    def _now(self, conn: psycopg.Connection, clock: Clock | None) -> float:
        if self._clock is not None:
            return self._clock()
        row = conn.execute(_SERVER_NOW).fetchone()
        if row is None:
            raise BackendUnavailable(self.name, "the server clock could not be read")
        return float(row[0])

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
        params: dict[str, object] = {"key": key, "longest": rules.longest_window}
        params.update({f"w{i}": rule.window for i, rule in enumerate(rules)})
        if self._clock is not None:
            params["now"] = self._clock()
        with self._session() as conn:
            with conn.pipeline():  # BEGIN, lock, read: one round trip
                conn.execute("BEGIN")
                conn.execute(_LOCK, (key,))
                cursor = conn.execute(self._read_sql(rules), params)
            row = cursor.fetchone()
            if row is None:
                raise BackendUnavailable(self.name, "the usage query returned no row")
            now, paused_until, *sums = row
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
            self._drop(conn)

    def _drop(self, conn: psycopg.Connection) -> None:
        """Close a connection in doubt; this thread opens a new one on its next call."""
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

    def refund(self, key: str, grant_id: str, rules: Limits) -> bool:
        def body(conn: psycopg.Connection) -> bool:
            cursor = conn.execute(
                "DELETE FROM ratelimit_grants WHERE key = %s AND grant_id = %s", (key, grant_id)
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
        def body(conn: psycopg.Connection) -> int:
            row = conn.execute(
                "SELECT COUNT(*) FROM ratelimit_grants WHERE key = %s", (key,)
            ).fetchone()
            return int(row[0]) if row else 0

        return self._run(body)

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
