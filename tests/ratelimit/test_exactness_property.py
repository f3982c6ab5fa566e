"""Property tests of exactness on a virtual clock (hypothesis).

1. Every backend against a brute-force reference model of the sliding-window log: the same
   verdicts, and every refusal's ``retry_after`` is exact (to float rounding) and honoured.
2. 8 threads, and many asyncio tasks, on one virtual clock never put more than N grants in any
   window of length W, in fail-fast and in wait mode.
"""

from __future__ import annotations

import asyncio
import math
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from windows import max_in_window

from ratelimit import (
    ManualClock,
    MemoryBackend,
    RateLimitExceeded,
    RequestLimit,
    SlidingWindowLimiter,
    SQLiteBackend,
    TokenLimit,
)

LIMITS = RequestLimit(4, 10.0) & TokenLimit(100, 25.0)
EXAMPLES = {"memory": 600, "sqlite": 150, "postgres": 60, "redis": 150}


class Reference:
    """The sliding-window log by brute force, independent of ``ratelimit.rules.decide``."""

    def __init__(self) -> None:
        self.grants: list[list] = []  # [stamp, requests, tokens, grant_id]
        self.paused_until = -math.inf

    def admits(self, t: float, requests: int, tokens: int) -> bool:
        if self.paused_until > t:
            return False
        for rule, amount in zip(LIMITS, (requests, tokens), strict=True):
            column = 1 if rule.unit == "requests" else 2
            used = sum(g[column] for g in self.grants if g[0] + rule.window > t)
            if used + amount > rule.limit:
                return False
        return True

    def first_admission(self, now: float, requests: int, tokens: int) -> float:
        candidates = {g[0] + rule.window for g in self.grants for rule in LIMITS} | {
            self.paused_until
        }
        for t in sorted(c for c in candidates if c > now):
            if self.admits(t, requests, tokens):
                return t
        raise AssertionError("nothing ever admits")


ADVANCE = st.tuples(st.just("advance"), st.floats(0, 12, allow_nan=False))
ACQUIRE = st.tuples(st.just("acquire"), st.integers(1, 3), st.integers(0, 60), st.booleans())
PAUSE = st.tuples(st.just("pause"), st.floats(0, 6, allow_nan=False))
CORRECT = st.tuples(st.just("correct"), st.integers(0, 1000), st.integers(0, 100))
# weighted towards acquisitions: 4 acquire : 3 advance : 1 pause : 1 correct
OP = st.integers(0, 8).flatmap(
    lambda i: ACQUIRE if i < 4 else ADVANCE if i < 7 else PAUSE if i == 7 else CORRECT
)
OPS = st.lists(OP, min_size=20, max_size=60)


def run_schedule(lim: SlidingWindowLimiter, clock: ManualClock, ops) -> None:
    ref = Reference()
    corrected = False
    for op in ops:
        if op[0] == "advance":
            clock.advance(op[1])
        elif op[0] == "pause":
            lim.pause(op[1])
            ref.paused_until = max(ref.paused_until, clock() + op[1])
        elif op[0] == "correct":
            if ref.grants:
                grant = ref.grants[op[1] % len(ref.grants)]
                if lim.correct(grant[3], op[2]):
                    grant[2] = op[2]
                    corrected = True
                else:  # gone only once it counts nowhere
                    assert grant[3].stamp + LIMITS.longest_window <= clock()
        else:
            _, requests, tokens, then_retry = op
            now = clock()
            try:
                grant = lim.acquire(requests, tokens=tokens)
            except RateLimitExceeded as exc:
                assert not ref.admits(now, requests, tokens)
                exact = ref.first_admission(now, requests, tokens)
                assert exc.retry_after > 0
                assert exact <= now + exc.retry_after <= exact + 2 * math.ulp(exact)
                if then_retry:
                    clock.sleep(exc.retry_after)
                    grant = lim.acquire(requests, tokens=tokens)  # must be admitted now
                    ref.grants.append([grant.stamp, requests, tokens, grant])
            else:
                assert ref.admits(now, requests, tokens)
                assert grant.stamp == now
                ref.grants.append([grant.stamp, requests, tokens, grant])
    stamps = [g[0] for g in ref.grants]
    assert max_in_window(stamps, 10.0, [g[1] for g in ref.grants]) <= 4
    if not corrected:
        assert max_in_window(stamps, 25.0, [g[2] for g in ref.grants]) <= 100


def test_every_backend_matches_the_reference_and_retry_after_is_exact(make_backend):
    clock = ManualClock(start=1_000_000.0)
    backend = make_backend(clock)

    @settings(
        max_examples=EXAMPLES[make_backend.kind],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(ops=OPS)
    def check(ops):
        backend.clear(make_backend.key)
        clock.advance(1000.0)  # a fresh stretch of time for every example
        lim = SlidingWindowLimiter(
            limits=LIMITS, backend=backend, key=make_backend.key, clock=clock, sleep=clock.sleep
        )
        run_schedule(lim, clock, ops)

    check()


SCHEDULE = st.lists(
    st.tuples(st.floats(0, 3, allow_nan=False), st.integers(1, 2)), min_size=3, max_size=12
)


def _backend(kind: str, clock: ManualClock, tmp_path_factory):
    if kind == "memory":
        return MemoryBackend()
    return SQLiteBackend(tmp_path_factory.mktemp("threads") / "limits.sqlite", clock=clock)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_eight_threads_never_overrun(kind, tmp_path_factory):
    @settings(max_examples=300 if kind == "memory" else 40, deadline=None)
    @given(
        schedules=st.lists(SCHEDULE, min_size=8, max_size=8),
        mode=st.sampled_from(["fail_fast", "wait"]),
    )
    def check(schedules, mode):
        clock = ManualClock(start=0.0)
        backend = _backend(kind, clock, tmp_path_factory)
        lim = SlidingWindowLimiter(
            limit=3,
            window=5.0,
            backend=backend,
            clock=clock,
            sleep=clock.sleep,
            mode=mode,
            max_wait=1e9,
        )
        grants, attempts = [], 0
        lock = threading.Lock()

        def worker(schedule):
            nonlocal attempts
            for delay, cost in schedule:
                clock.sleep(delay)
                with lock:
                    attempts += 1
                try:
                    grant = lim.acquire(cost)
                except RateLimitExceeded:
                    assert mode == "fail_fast"
                    continue
                with lock:
                    grants.append(grant)

        threads = [threading.Thread(target=worker, args=(s,)) for s in schedules]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        backend.close()
        assert max_in_window([g.stamp for g in grants], 5.0, [g.requests for g in grants]) <= 3
        if mode == "wait":
            assert len(grants) == attempts

    check()


@settings(max_examples=300, deadline=None)
@given(
    schedules=st.lists(SCHEDULE, min_size=1, max_size=16),
    mode=st.sampled_from(["fail_fast", "wait"]),
)
def test_asyncio_tasks_never_overrun(schedules, mode):
    clock = ManualClock(start=0.0)
    lim = SlidingWindowLimiter(
        limit=3, window=5.0, clock=clock, sleep=clock.sleep, mode=mode, max_wait=1e9
    )

    async def worker(schedule, grants):
        for delay, cost in schedule:
            await clock.asleep(delay)
            try:
                grants.append(await lim.aacquire(cost))
            except RateLimitExceeded:
                assert mode == "fail_fast"

    async def main():
        grants: list = []
        await asyncio.gather(*(worker(s, grants) for s in schedules))
        return grants

    grants = asyncio.run(main())
    assert max_in_window([g.stamp for g in grants], 5.0, [g.requests for g in grants]) <= 3
    if mode == "wait":
        assert len(grants) == sum(len(s) for s in schedules)


def test_long_schedules_on_memory_survive_log_compaction():
    """Hundreds of grants: the memory log compacts its prefix; decisions stay identical."""
    clock = ManualClock(start=0.0)
    backend = MemoryBackend()

    @settings(max_examples=40, deadline=None)
    @given(ops=st.lists(OP, min_size=200, max_size=400))
    def check(ops):
        backend.clear("long")
        clock.advance(1000.0)
        lim = SlidingWindowLimiter(
            limits=LIMITS, backend=backend, key="long", clock=clock, sleep=clock.sleep
        )
        run_schedule(lim, clock, ops)

    check()
