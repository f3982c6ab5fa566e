"""One conformance suite, run against every backend (see conftest.py for which run where)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from windows import max_in_window

from ratelimit import (
    BackendUnavailable,
    CostExceedsLimit,
    ManualClock,
    PostgresBackend,
    RateLimitExceeded,
    RedisBackend,
    RequestLimit,
    SlidingWindowLimiter,
    SQLiteBackend,
    TokenLimit,
)


def virtual(make_backend, **kwargs):
    """A limiter on a virtual clock that both the limiter and the backend read."""
    clock = ManualClock(start=1_000_000.0)
    backend = make_backend(clock)
    lim = SlidingWindowLimiter(
        backend=backend, key=make_backend.key, clock=clock, sleep=clock.sleep, **kwargs
    )
    return lim, clock


def test_setup_is_safe_twice(make_backend):
    backend = make_backend()
    backend.setup()
    backend.setup()


def test_admits_the_limit_then_refuses_with_exact_retry_after(make_backend):
    lim, clock = virtual(make_backend, limit=3, window=60.0)
    stamps = []
    for _ in range(3):
        stamps.append(lim.acquire().stamp)
        clock.advance(7.25)
    assert stamps == [1_000_000.0, 1_000_007.25, 1_000_014.5]
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    assert info.value.retry_after == 60.0 - 3 * 7.25
    clock.sleep(info.value.retry_after)
    assert lim.acquire().stamp == 1_000_060.0


def test_a_slot_frees_exactly_at_stamp_plus_window(make_backend):
    lim, clock = virtual(make_backend, limit=1, window=10.0)
    lim.acquire()
    clock.set(1_000_009.999999)
    with pytest.raises(RateLimitExceeded):
        lim.acquire()
    clock.set(1_000_010.0)
    lim.acquire()


def test_a_refusal_records_nothing(make_backend):
    lim, clock = virtual(make_backend, limit=2, window=60.0)
    lim.acquire(), lim.acquire()
    for _ in range(5):
        with pytest.raises(RateLimitExceeded):
            lim.acquire()
    assert lim.backend.stored_entries(lim.key) == 2


def test_requests_and_tokens_are_charged_atomically(make_backend):
    lim, clock = virtual(make_backend, limits=RequestLimit(5, 60.0) & TokenLimit(1000, 60.0))
    lim.acquire(tokens=800)
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire(tokens=300)
    assert info.value.retry_after == 60.0
    requests, tokens = lim.usages()
    assert (requests.used, tokens.used) == (1, 800)  # the refusal charged neither
    lim.acquire(tokens=200)
    assert [u.used for u in lim.usages()] == [2, 1000]


def test_the_tightest_limit_decides_the_wait(make_backend):
    lim, clock = virtual(make_backend, limits=RequestLimit(2, 10.0) & TokenLimit(100, 60.0))
    lim.acquire(tokens=90)
    clock.advance(1)
    lim.acquire(tokens=5)
    clock.advance(1)
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire(tokens=10)
    # requests free at t+10 (first grant expires), tokens need the 90 to expire at t+60
    assert info.value.retry_after == 58.0


def test_a_token_estimate_is_corrected_with_the_reported_usage(make_backend):
    lim, clock = virtual(make_backend, limits=RequestLimit(10, 60.0) & TokenLimit(1000, 60.0))
    grant = lim.acquire(tokens=100)
    assert lim.correct(grant, 900) is True
    assert lim.usages()[1].used == 900
    clock.advance(5)
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire(tokens=200)
    assert info.value.retry_after == 55.0
    lim.acquire(tokens=100)


def test_correcting_an_unknown_grant_says_so(make_backend):
    lim, clock = virtual(make_backend)
    grant = lim.acquire(tokens=5)
    clock.advance(61)
    lim.acquire()  # prunes the first grant
    assert lim.correct(grant, 10) is False


def test_a_refunded_grant_gives_its_slot_back(make_backend):
    lim, clock = virtual(make_backend, limits=RequestLimit(3, 60.0) & TokenLimit(1000, 60.0))
    first = lim.acquire(tokens=100)
    clock.advance(1)
    middle = lim.acquire(tokens=300)
    clock.advance(1)
    lim.acquire(tokens=50)
    with pytest.raises(RateLimitExceeded):
        lim.acquire()
    assert lim.refund(middle) is True
    assert [u.used for u in lim.usages()] == [2, 150]  # requests and tokens both given back
    assert lim.refund(middle) is False  # once only
    lim.acquire(tokens=10)  # the freed slot
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    assert info.value.retry_after == 58.0  # the first grant (t) still counts until t + 60
    clock.advance(58)
    lim.acquire()
    assert lim.refund(first) is False  # pruned: it no longer counted anyway


def test_a_charge_larger_than_a_window_is_refused_at_once(make_backend):
    lim, clock = virtual(
        make_backend, limits=RequestLimit(5, 60.0) & TokenLimit(1000, 60.0), mode="wait"
    )
    with pytest.raises(CostExceedsLimit) as info:
        lim.acquire(tokens=1001)
    assert info.value.unit == "tokens"
    assert clock.slept == []
    assert lim.backend.stored_entries(lim.key) == 0


def test_fits_answers_for_a_whole_budget_without_reserving(make_backend):
    lim, clock = virtual(make_backend, limit=5, window=60.0)
    lim.acquire(), lim.acquire()
    clock.advance(30)
    assert lim.fits(3) == 0.0
    assert lim.fits(4) == 30.0
    assert lim.fits(6) == float("inf")
    assert lim.usage().used == 2


def test_a_pause_holds_every_instance_sharing_the_storage(make_backend):
    clock = ManualClock(start=500.0)
    first, second = make_backend(clock), make_backend(clock)
    a = SlidingWindowLimiter(backend=first, key=make_backend.key, clock=clock, sleep=clock.sleep)
    b = SlidingWindowLimiter(
        backend=second, key=make_backend.key, clock=clock, sleep=clock.sleep, mode="wait"
    )
    a.pause(12.5)
    a.pause(1.0)  # never shortens
    assert b.fits(1) == 12.5
    assert b.acquire().stamp == 512.5
    assert clock.slept == [12.5]


def test_instances_sharing_the_storage_share_the_budget(make_backend):
    clock = ManualClock(start=0.0)
    lims = [
        SlidingWindowLimiter(
            limit=3, backend=make_backend(clock), key=make_backend.key, clock=clock
        )
        for _ in range(3)
    ]
    for lim in lims:
        lim.acquire()
    with pytest.raises(RateLimitExceeded):
        lims[0].acquire()


def test_keys_are_independent(make_backend):
    clock = ManualClock()
    backend = make_backend(clock)
    a = SlidingWindowLimiter(limit=1, backend=backend, key=make_backend.key, clock=clock)
    b = SlidingWindowLimiter(limit=1, backend=backend, key=make_backend.key + "-other", clock=clock)
    try:
        a.acquire(), b.acquire()
        a.pause(100)
        assert b.fits(0) == 0.0
    finally:
        backend.clear(b.key)


def test_storage_stays_bounded(make_backend):
    lim, clock = virtual(make_backend, limit=4, window=10.0, mode="wait")
    for _ in range(60):
        lim.acquire()
        assert lim.backend.stored_entries(lim.key) <= 4
    assert clock() == 1_000_000.0 + 140.0


def test_wait_mode_async_on_a_virtual_clock(make_backend):
    lim, clock = virtual(make_backend, limit=2, window=60.0, mode="wait")

    async def main():
        return [(await lim.aacquire()).stamp for _ in range(5)]

    assert asyncio.run(main()) == [1_000_000.0, 1_000_000.0, 1_000_060.0, 1_000_060.0, 1_000_120.0]


def test_stamps_come_from_the_backend_clock_not_the_callers(make_backend):
    backend = make_backend()
    skewed = lambda: time.monotonic() + 3600.0  # noqa: E731 - a caller whose clock is an hour off
    lim = SlidingWindowLimiter(
        limit=2, window=0.25, backend=backend, key=make_backend.key, clock=skewed, mode="wait"
    )
    stamps = [lim.acquire().stamp for _ in range(4)]
    assert max_in_window(stamps, 0.25) == 2
    if make_backend.shared:
        assert abs(stamps[0] - time.time()) < 5.0  # the host's or server's wall clock
    else:
        assert abs(stamps[0] - skewed()) < 5.0  # memory: the limiter's clock is the clock


def test_threads_hammering_in_real_time_never_overrun(make_backend):
    backend = make_backend()
    limit, window = 5, 0.2
    lim = SlidingWindowLimiter(limit=limit, window=window, backend=backend, key=make_backend.key)
    stamps: list[float] = []
    refused = 0
    lock = threading.Lock()
    stop = time.monotonic() + 0.7

    def hammer():
        nonlocal refused
        while time.monotonic() < stop:
            try:
                grant = lim.acquire()
            except RateLimitExceeded:
                with lock:
                    refused += 1
                time.sleep(0.003)
                continue
            with lock:
                stamps.append(grant.stamp)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert refused > 0 and len(stamps) >= 2 * limit
    assert max_in_window(stamps, window) == limit


def test_async_tasks_in_real_time_never_overrun(make_backend):
    backend = make_backend()
    lim = SlidingWindowLimiter(
        limit=3, window=0.15, backend=backend, key=make_backend.key, mode="wait", max_wait=5
    )

    async def main():
        grants = await asyncio.gather(*(lim.aacquire() for _ in range(10)))
        return [g.stamp for g in grants]

    stamps = asyncio.run(main())
    assert len(stamps) == 10
    assert max_in_window(stamps, 0.15) == 3
    assert max(stamps) - min(stamps) >= 3 * 0.15 - 1e-6


UNREACHABLE = {
    "sqlite": lambda tmp_path: SQLiteBackend(
        tmp_path / "missing-dir" / "limits.sqlite", timeout=0.5
    ),
    "postgres": lambda tmp_path: PostgresBackend("postgresql://root@127.0.0.1:1/test", timeout=1),
    "redis": lambda tmp_path: RedisBackend("redis://127.0.0.1:1/0", timeout=0.5),
}


@pytest.mark.parametrize("kind", sorted(UNREACHABLE))
def test_an_unreachable_backend_fails_closed(kind, tmp_path):
    lim = SlidingWindowLimiter(backend=UNREACHABLE[kind](tmp_path), mode="wait", sleep=pytest.fail)
    for call in (lim.acquire, lim.usage, lambda: lim.pause(1.0)):
        with pytest.raises(BackendUnavailable) as info:
            call()
        assert info.value.code == "backend_unavailable"
        assert info.value.backend == kind


def test_a_locked_sqlite_file_fails_closed(tmp_path):
    import sqlite3

    path = tmp_path / "limits.sqlite"
    SQLiteBackend(path).setup()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        lim = SlidingWindowLimiter(backend=SQLiteBackend(path, timeout=0.2))
        with pytest.raises(BackendUnavailable, match="locked"):
            lim.acquire()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
