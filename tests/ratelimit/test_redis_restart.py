"""A Redis restart that loses the data never lets more than the limit into a window, and a
frozen Redis fails closed within the bound.

A private ``redis-server`` without persistence is started on a free port and really restarted
in the middle of a full window (grants before and after are checked together), or frozen with
SIGSTOP. Needs the ``redis-server`` binary; the idle-marker case uses ``SQLGATE_TEST_REDIS_URL``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid

import pytest
import redis as redis_py
from windows import max_in_window

from ratelimit import BackendUnavailable, RateLimitExceeded, RedisBackend, SlidingWindowLimiter

LIMIT, WINDOW = 5, 1.0
SERVER = shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateRedis:
    """A throwaway redis-server that keeps nothing across a restart."""

    def __init__(self, folder) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis_py.Redis.from_url(self.url, socket_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis_py.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        client.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path):
    if SERVER is None:
        pytest.skip("redis-server is not installed; the restart test needs its own server")
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def _acquire_until(lim, stop_at, stamps, errors):
    while time.monotonic() < stop_at:
        try:
            stamps.append(lim.acquire().stamp)
        except RateLimitExceeded as exc:
            time.sleep(min(exc.retry_after, 0.01))
        except BackendUnavailable as exc:
            errors.append(exc)
            time.sleep(0.01)


def test_a_fresh_server_admits_nothing_until_a_window_after_its_start(private_redis):
    backend = RedisBackend(private_redis.url, timeout=0.5)
    lim = SlidingWindowLimiter(LIMIT, WINDOW, key="fresh", backend=backend)
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    # the server started under a second ago; a whole second of uptime is assumed lost
    assert 0 < info.value.retry_after <= WINDOW + 1.0 + 1e-6
    time.sleep(info.value.retry_after)
    assert lim.acquire().requests == 1
    backend.close()


def test_a_restart_in_the_middle_of_a_full_window_admits_no_more_than_the_limit(
    private_redis,
):
    backend = RedisBackend(private_redis.url, timeout=0.5)
    lim = SlidingWindowLimiter(LIMIT, WINDOW, key="restarted", backend=backend)
    stamps: list[float] = []
    errors: list[BackendUnavailable] = []
    # wait out the fresh server's own guard, then fill the window at once
    _acquire_until(lim, time.monotonic() + 2.5, stamps, errors)
    before = len(stamps)
    assert before >= LIMIT and errors == []

    private_redis.stop()  # nothing is saved: the grants and the marker are gone
    private_redis.start()
    restarted_at = time.time()
    _acquire_until(lim, time.monotonic() + WINDOW + 2.5, stamps, errors)
    backend.close()

    after = stamps[before:]
    assert after, "nothing was admitted after the restart"
    assert min(after) >= restarted_at + WINDOW - 1.0  # held for a window from the start
    assert max_in_window(stamps, WINDOW) <= LIMIT


@pytest.mark.skipif(
    not os.environ.get("SQLGATE_TEST_REDIS_URL"), reason="SQLGATE_TEST_REDIS_URL is not set"
)
def test_a_marker_lost_to_idleness_on_a_long_running_server_costs_no_wait():
    url = os.environ["SQLGATE_TEST_REDIS_URL"]
    client = redis_py.Redis.from_url(url)
    if int(client.info("server")["uptime_in_seconds"]) < 5:
        pytest.skip("the shared Redis started less than 5 s ago")
    backend = RedisBackend(url)
    key = f"idle-{uuid.uuid4().hex[:10]}"
    lim = SlidingWindowLimiter(2, 0.5, key=key, backend=backend)
    try:
        lim.acquire()
        markers = list(client.scan_iter(match=f"*{{{key}}}:alive"))
        assert len(markers) == 1
        client.delete(*markers)  # as if every key of this limiter had expired while idle
        assert lim.acquire().requests == 1
        assert len(list(client.scan_iter(match=f"*{{{key}}}:alive"))) == 1
    finally:
        backend.clear(key)
        backend.close()
        client.close()


def test_a_frozen_server_gives_backend_unavailable_within_the_bound(private_redis):
    bound = 0.5
    backend = RedisBackend(private_redis.url, timeout=bound)
    lim = SlidingWindowLimiter(LIMIT, WINDOW, key="frozen", backend=backend)
    backend.setup()  # connected: what follows measures a silent server alone
    assert private_redis.process is not None
    private_redis.process.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(BackendUnavailable):
            lim.acquire()
        took = time.monotonic() - started
    finally:
        private_redis.process.send_signal(signal.SIGCONT)
    assert took <= bound + 0.35, f"took {took:.3f} s"
    backend.close()
