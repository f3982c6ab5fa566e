"""Worker processes for the multi-process exactness test (spawned, so importable by name)."""

from __future__ import annotations

import random
import threading
import time

from ratelimit import (
    PostgresBackend,
    RateLimitExceeded,
    RedisBackend,
    SlidingWindowLimiter,
    SQLiteBackend,
)

real_time = time.time


def open_backend(kind: str, location: str, clock=None, **options):
    """Open a shared backend by kind and location (a file path or a URL)."""
    if kind == "sqlite":
        return SQLiteBackend(location, clock=clock, **options)
    if kind == "postgres":
        return PostgresBackend(location, clock=clock)
    if kind == "redis":
        return RedisBackend(location, clock=clock)
    raise ValueError(kind)


def hammer(kind, location, key, limit, window, margin, start_at, duration, skew, seed):
    """4 threads: 2 in bursts (fail-fast, retrying at once), 2 with Poisson arrivals (wait mode).

    ``skew`` shifts this process's clock: ``time.time`` and the limiter's clock both read
    ``skew`` seconds off. Returns ``(stamp, returned_at)`` pairs on the true clock.
    """
    if skew:
        time.time = lambda: real_time() + skew
    backend = open_backend(kind, location)
    skewed_clock = lambda: time.monotonic() + skew  # noqa: E731
    fast = SlidingWindowLimiter(
        limit, window, key=key, backend=backend, clock=skewed_clock, margin=margin
    )
    patient = SlidingWindowLimiter(
        limit,
        window,
        key=key,
        backend=backend,
        clock=skewed_clock,
        margin=margin,
        mode="wait",
        max_wait=10.0,
    )
    results: list[tuple[float, float]] = []
    lock = threading.Lock()
    stop_at = start_at + duration

    def burst(rng):
        while real_time() < stop_at:
            try:
                grant = fast.acquire()
            except RateLimitExceeded as exc:
                time.sleep(min(exc.retry_after, 0.002) * rng.random())
                continue
            returned = real_time()
            with lock:
                results.append((grant.stamp, returned))

    def poisson(rng):
        while real_time() < stop_at:
            time.sleep(rng.expovariate(limit / window * 2))
            grant = patient.acquire()
            returned = real_time()
            with lock:
                results.append((grant.stamp, returned))

    while real_time() < start_at:
        time.sleep(0.001)
    threads = [
        threading.Thread(target=fn, args=(random.Random(seed * 10 + i),))
        for i, fn in enumerate((burst, burst, poisson, poisson))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backend.close()
    return results


def ready() -> bool:
    """A no-op that proves a worker process is up and has imported this module."""
    return True


def hammer_counting_refusals(
    kind, location, key, limit, window, start_at, duration, seed, **options
):
    """4 threads acquiring as fast as they can (2 fail-fast, 2 in wait mode) for ``duration``.

    Unlike :func:`hammer`, a :class:`BackendUnavailable` does not stop a thread: it is counted
    and the thread goes on. ``options`` go to the backend. Returns
    ``(stamps, tries, unavailable messages)``.
    """
    from ratelimit import BackendUnavailable

    backend = open_backend(kind, location, **options)
    fast = SlidingWindowLimiter(limit, window, key=key, backend=backend)
    patient = SlidingWindowLimiter(
        limit, window, key=key, backend=backend, mode="wait", max_wait=30.0
    )
    stamps: list[float] = []
    unavailable: list[str] = []
    tries = [0]
    lock = threading.Lock()
    stop_at = start_at + duration

    def run(lim, rng):
        while real_time() < stop_at:
            with lock:
                tries[0] += 1
            try:
                grant = lim.acquire()
            except RateLimitExceeded:
                continue
            except BackendUnavailable as exc:
                with lock:
                    unavailable.append(str(exc))
                continue
            with lock:
                stamps.append(grant.stamp)

    while real_time() < start_at:
        time.sleep(0.001)
    threads = [
        threading.Thread(target=run, args=(lim, random.Random(seed * 10 + i)))
        for i, lim in enumerate((fast, fast, patient, patient))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backend.close()
    return stamps, tries[0], unavailable
