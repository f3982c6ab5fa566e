"""The limiter's contract on the memory backend with a virtual clock (no real sleeping)."""

import asyncio
import math

import pytest

from ratelimit import (
    BackendUnavailable,
    CostExceedsLimit,
    LimiterConfigError,
    ManualClock,
    MemoryBackend,
    RateLimitExceeded,
    SlidingWindowLimiter,
    Usage,
)


@pytest.fixture
def clock():
    return ManualClock(start=1000.0)


def limiter(clock, **kwargs):
    kwargs.setdefault("sleep", clock.sleep)
    return SlidingWindowLimiter(clock=clock, **kwargs)


def test_defaults_are_five_per_minute_fail_fast():
    lim = SlidingWindowLimiter()
    assert (lim.limit, lim.window, lim.mode, lim.max_wait) == (5, 60.0, "fail_fast", 120.0)
    assert isinstance(lim.backend, MemoryBackend)


def test_admits_exactly_limit_then_refuses_with_exact_retry_after(clock):
    lim = limiter(clock)
    stamps = []
    for _ in range(5):
        stamps.append(lim.acquire().stamp)
        clock.advance(1.0)
    assert stamps == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    # the oldest grant (t=1000) stops counting at 1060; now is 1005
    assert info.value.retry_after == 55.0
    assert info.value.code == "rate_limited"
    assert (info.value.limit, info.value.window) == (5, 60.0)


def test_slot_frees_exactly_at_stamp_plus_window(clock):
    lim = limiter(clock, limit=1, window=10.0)
    lim.acquire()
    clock.advance(10.0 - 1e-9)
    with pytest.raises(RateLimitExceeded):
        lim.acquire()
    clock.set(1010.0)
    assert lim.acquire().stamp == 1010.0


def test_fail_fast_never_sleeps(clock):
    calls = []
    lim = SlidingWindowLimiter(limit=1, window=60.0, clock=clock, sleep=calls.append)
    lim.acquire()
    for _ in range(3):
        with pytest.raises(RateLimitExceeded):
            lim.acquire()
    assert calls == []


def test_wait_mode_sleeps_exactly_until_the_slot_frees(clock):
    lim = limiter(clock, limit=2, window=60.0, mode="wait")
    lim.acquire()
    clock.advance(10)
    lim.acquire()
    grant = lim.acquire()
    assert clock.slept == [50.0]
    assert grant.stamp == 1060.0 and grant.waited == 50.0
    grant = lim.acquire()
    assert clock.slept == [50.0, 10.0]
    assert grant.stamp == 1070.0


def test_wait_mode_tells_each_wait_before_it_sleeps(clock):
    told: list[float] = []
    lim = limiter(clock, limit=1, window=60.0, mode="wait")
    lim.on_wait = told.append
    lim.acquire()
    clock.advance(15)
    lim.acquire()
    assert told == clock.slept == [45.0]


def test_wait_mode_with_a_recording_sleep_gives_up_after_max_wait(clock):
    calls = []
    lim = SlidingWindowLimiter(
        limit=1, window=60.0, clock=clock, sleep=calls.append, mode="wait", max_wait=150.0
    )
    lim.acquire()
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    # the clock never moves: every re-check after a sleep asks for 60 s again
    assert calls == [60.0, 60.0]
    assert "max_wait=150" in str(info.value)


def test_wait_mode_refuses_at_once_when_the_wait_exceeds_max_wait(clock):
    lim = limiter(clock, limit=1, window=60.0, mode="wait", max_wait=59.0)
    lim.acquire()
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    assert info.value.retry_after == 60.0
    assert clock.slept == []


def test_cost_counts_several_slots(clock):
    lim = limiter(clock, limit=5)
    lim.acquire(cost=3)
    with pytest.raises(RateLimitExceeded):
        lim.acquire(cost=3)
    lim.acquire(cost=2)
    assert lim.usage().used == 5


def test_a_cost_larger_than_the_limit_is_refused_at_once_in_every_mode(clock):
    for mode in ("fail_fast", "wait"):
        lim = limiter(clock, limit=5, mode=mode)
        with pytest.raises(CostExceedsLimit) as info:
            lim.acquire(cost=6)
        assert info.value.code == "cost_exceeds_limit"
    assert clock.slept == []


def test_refusal_records_nothing(clock):
    lim = limiter(clock, limit=1)
    lim.acquire()
    for _ in range(10):
        with pytest.raises(RateLimitExceeded):
            lim.acquire()
    assert lim.backend.stored_entries(lim.key) == 1


def test_usage_reports_used_and_next_free_slot(clock):
    lim = limiter(clock, limit=2, window=30.0)
    assert lim.usage() == Usage(used=0, limit=2, window=30.0, retry_after=0.0)
    lim.acquire()
    clock.advance(5)
    lim.acquire()
    assert lim.usage() == Usage(used=2, limit=2, window=30.0, retry_after=25.0)
    clock.advance(25)
    assert lim.usage() == Usage(used=1, limit=2, window=30.0, retry_after=0.0)


def test_fits_is_admission_control_for_a_whole_budget(clock):
    lim = limiter(clock, limit=5, window=60.0)
    assert lim.fits(5) == 0.0
    lim.acquire()
    clock.advance(20)
    lim.acquire()
    assert lim.fits(3) == 0.0
    assert lim.fits(4) == 40.0  # the first grant must expire
    assert lim.fits(5) == 60.0  # both must expire
    assert lim.fits(6) == math.inf
    assert lim.usage().used == 2  # asking reserves nothing


def test_pause_blocks_everyone_sharing_the_key(clock):
    backend = MemoryBackend()
    a = limiter(clock, backend=backend, key="acct")
    b = limiter(clock, backend=backend, key="acct")
    other = limiter(clock, backend=backend, key="other-acct")
    a.pause(30.0)
    with pytest.raises(RateLimitExceeded) as info:
        b.acquire()
    assert info.value.retry_after == 30.0
    other.acquire()
    a.pause(10.0)  # a shorter pause never shortens the current one
    clock.advance(30.0)
    assert b.acquire().stamp == 1030.0


def test_pause_in_wait_mode_delays_the_next_grant(clock):
    lim = limiter(clock, mode="wait")
    lim.pause(2.5)
    assert lim.acquire().stamp == 1002.5
    assert clock.slept == [2.5]


def test_limiters_sharing_a_backend_share_the_budget(clock):
    backend = MemoryBackend()
    a = limiter(clock, limit=3, backend=backend)
    b = limiter(clock, limit=3, backend=backend)
    a.acquire(), b.acquire(), a.acquire()
    with pytest.raises(RateLimitExceeded):
        b.acquire()


def test_storage_is_pruned(clock):
    lim = limiter(clock, limit=5, window=10.0, mode="wait")
    for _ in range(1000):
        lim.acquire()
    assert lim.backend.stored_entries(lim.key) <= 5


def test_backend_clock_wins_over_limiter_clock():
    backend_clock = ManualClock(start=50.0)
    lim = SlidingWindowLimiter(
        clock=ManualClock(start=0.0), backend=MemoryBackend(clock=backend_clock)
    )
    assert lim.acquire().stamp == 50.0


def test_async_acquire_waits_without_blocking(clock):
    lim = limiter(clock, limit=2, window=60.0, mode="wait")

    async def main():
        return [await lim.aacquire() for _ in range(5)]

    grants = asyncio.run(main())
    assert [g.stamp for g in grants] == [1000.0, 1000.0, 1060.0, 1060.0, 1120.0]
    assert clock.slept == [60.0, 60.0]


def test_async_fail_fast(clock):
    lim = limiter(clock, limit=1)

    async def main():
        await lim.aacquire()
        with pytest.raises(RateLimitExceeded) as info:
            await lim.aacquire()
        return info.value.retry_after

    assert asyncio.run(main()) == 60.0


def test_cancelled_async_waiter_leaves_no_stamp():
    lim = SlidingWindowLimiter(limit=1, window=0.2, mode="wait")

    async def main():
        await lim.aacquire()
        waiter = asyncio.ensure_future(lim.aacquire())
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    assert lim.backend.stored_entries(lim.key) == 1


class _DownBackend(MemoryBackend):
    name = "down"

    def acquire(self, key, rules, charge, clock):
        raise BackendUnavailable(self.name, "connection refused")


def test_an_unreachable_backend_fails_closed(clock):
    lim = limiter(clock, backend=_DownBackend(), mode="wait")
    with pytest.raises(BackendUnavailable):
        lim.acquire()
    assert clock.slept == []


def test_the_safety_margin_lengthens_every_enforced_window(clock):
    lim = limiter(clock, limit=1, window=10.0, margin=0.5)
    lim.acquire()
    with pytest.raises(RateLimitExceeded) as info:
        lim.acquire()
    assert info.value.retry_after == 10.5
    assert (lim.window, lim.usage().window) == (10.0, 10.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(limit=0),
        dict(window=0),
        dict(window=math.inf),
        dict(mode="block"),
        dict(max_wait=-1),
        dict(margin=-1),
    ],
)
def test_impossible_configuration_is_refused(kwargs):
    with pytest.raises(LimiterConfigError):
        SlidingWindowLimiter(**kwargs)


def test_negative_costs_and_pauses_are_refused(clock):
    lim = limiter(clock)
    with pytest.raises(LimiterConfigError):
        lim.acquire(cost=-1)
    with pytest.raises(LimiterConfigError):
        lim.pause(-1)
    with pytest.raises(LimiterConfigError):
        lim.pause(math.nan)


def test_a_request_admitted_at_once_did_not_wait(clock):
    """Only a refusal makes a wait: the backend's own round trip is not one."""
    lim = limiter(clock, limit=2, window=60.0, mode="wait")
    slow_backend = lim.backend.acquire

    def acquire(*args, **kwargs):
        clock.advance(0.002)  # a shared backend's round trip
        return slow_backend(*args, **kwargs)

    lim.backend.acquire = acquire  # type: ignore[method-assign]
    assert lim.acquire().waited == 0.0
    assert lim.acquire().waited == 0.0
    held = lim.acquire()
    assert held.waited > 59.0
    clock.advance(120)
    assert lim.acquire().waited == 0.0
