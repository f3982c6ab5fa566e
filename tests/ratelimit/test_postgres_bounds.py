"""The PostgreSQL backend answers within its bound whatever the server does.

On the real server named by ``SQLGATE_TEST_POSTGRES_URL``: another session holding the key's
advisory lock, the backend's own server process frozen with SIGSTOP, and (no PostgreSQL needed)
a server that accepts TCP connections but never speaks. Each call must raise
``BackendUnavailable`` within the configured bound (plus the watchdog's 50 ms poll and
scheduling slack), and the backend must work again once the fault is gone.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid

import psycopg
import pytest

from ratelimit import BackendUnavailable, PostgresBackend, SlidingWindowLimiter
from ratelimit.backends.postgres import libpq_url

URL = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
BOUND = 1.0
SLACK = 0.1  # scheduling; the backend itself aims a tenth under its bound

needs_postgres = pytest.mark.skipif(
    not URL, reason="SQLGATE_TEST_POSTGRES_URL is not set; the PostgreSQL backend is not tested"
)


def timed(call):
    """Run ``call``; return (seconds taken, the exception raised or None)."""
    started = time.monotonic()
    try:
        call()
    except BackendUnavailable as exc:
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


@pytest.fixture
def limiter():
    name = f"sqlgate-test-{uuid.uuid4().hex[:10]}"
    backend = PostgresBackend(URL, timeout=BOUND, application_name=name)
    key = f"bounds-{uuid.uuid4().hex[:10]}"
    lim = SlidingWindowLimiter(limit=1000, window=60.0, key=key, backend=backend)
    yield lim, name
    try:
        backend.clear(key)
    finally:
        backend.close()


def test_the_default_bound_is_two_seconds_at_most():
    assert PostgresBackend("postgresql://root@127.0.0.1:1/x").timeout <= 2.0


@needs_postgres
def test_a_held_advisory_lock_gives_backend_unavailable_within_the_bound(limiter):
    lim, _ = limiter
    lim.acquire()  # connected and migrated: what follows measures the lock wait alone
    with psycopg.connect(libpq_url(URL), autocommit=True) as holder:
        holder.execute(
            "SELECT pg_advisory_lock(hashtextextended('sqlgate.ratelimit:' || %s, 0))",
            (lim.key,),
        )
        for call in (lim.acquire, lim.usage, lambda: lim.pause(0.0)):
            took, exc = timed(call)
            assert exc is not None, "a call went through a held lock"
            assert exc.code == "backend_unavailable" and exc.backend == "postgres"
            assert "lock" in exc.detail
            assert took <= BOUND + SLACK, f"took {took:.3f} s"
        holder.execute(
            "SELECT pg_advisory_unlock(hashtextextended('sqlgate.ratelimit:' || %s, 0))",
            (lim.key,),
        )
    assert lim.acquire().requests == 1  # the same connection serves again


def _server_pids(application_name: str) -> set[int]:
    with psycopg.connect(libpq_url(URL), autocommit=True) as probe:
        rows = probe.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (application_name,)
        ).fetchall()
    return {int(pid) for (pid,) in rows}


@needs_postgres
def test_a_frozen_server_process_gives_backend_unavailable_within_the_bound(limiter):
    lim, name = limiter
    lim.acquire()
    [pid] = _server_pids(name)
    try:
        os.kill(pid, signal.SIGSTOP)
    except PermissionError:
        pytest.skip("freezing a PostgreSQL server process needs its user or root")
    try:
        took, exc = timed(lim.acquire)
        assert exc is not None, "a frozen server admitted a request"
        assert "no answer within" in exc.detail
        assert took <= BOUND + SLACK, f"took {took:.3f} s"
    finally:
        os.kill(pid, signal.SIGCONT)
    # the frozen session was dropped; the next call opens a new one
    assert lim.acquire().requests == 1
    deadline = time.monotonic() + 5  # the thawed process sees its socket shut, and exits
    while pid in _server_pids(name) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_server_pids(name) - {pid}) == 1 and pid not in _server_pids(name)


def test_a_server_that_never_speaks_gives_backend_unavailable_within_the_bound():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes handshakes; nobody ever answers
        port = silent.getsockname()[1]
        backend = PostgresBackend(f"postgresql://root@127.0.0.1:{port}/x", timeout=BOUND)
        lim = SlidingWindowLimiter(backend=backend)
        for call in (lim.acquire, lim.usage):
            took, exc = timed(call)
            assert exc is not None
            assert "could not connect within" in exc.detail
            assert took <= BOUND + SLACK, f"took {took:.3f} s"
        backend.close()


def test_the_bound_must_be_positive():
    from ratelimit import LimiterConfigError

    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(LimiterConfigError):
            PostgresBackend("postgresql://root@127.0.0.1:1/x", timeout=bad)
