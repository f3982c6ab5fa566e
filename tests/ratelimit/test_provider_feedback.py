"""A provider's 429 pauses every worker sharing the limiter, and every attempt passes the limiter."""

from __future__ import annotations

import asyncio
import math

import pytest

from ratelimit import ManualClock, SlidingWindowLimiter, parse_duration, retry_after_from_headers


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": "2", "retry-after-ms": "2500"}, 2.5),
        ({"retry-after": "Sat, 21 Nov 2026 10:00:30 GMT"}, 30.0),
        ({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m2s"}, 62.0),
        ({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "10s"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_from_headers(headers, expected):
    wall_clock = lambda: 1_795_255_200.0  # noqa: E731 - Sat, 21 Nov 2026 10:00:00 GMT
    assert retry_after_from_headers(headers, wall_clock=wall_clock) == expected


@pytest.mark.parametrize(
    ("text", "seconds"), [("1h", 3600.0), ("6m0s", 360.0), ("20ms", 0.02), ("1x", None), ("", None)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


class FakeProvider:
    """Allows ``limit`` attempts per ``window`` on its own; answers 429 with ``retry-after-ms``."""

    def __init__(self, clock: ManualClock, limit: int, window: float) -> None:
        self.clock = clock
        self.limit = limit
        self.window = window
        self.accepted: list[float] = []
        self.attempts: list[float] = []
        self.refusals: list[tuple[float, float]] = []  # (at, retry-after seconds)

    def call(self) -> tuple[int, dict[str, str]]:
        now = self.clock()
        self.attempts.append(now)
        live = [t for t in self.accepted if t + self.window > now]
        if len(live) < self.limit:
            self.accepted.append(now)
            return 200, {}
        ms = math.ceil((live[0] + self.window - now) * 1000)
        self.refusals.append((now, ms / 1000))
        return 429, {"retry-after-ms": str(ms)}


def test_a_429_pauses_every_worker_and_grants_equal_attempts(make_backend):
    clock = ManualClock(start=10_000.0)
    provider = FakeProvider(clock, limit=3, window=10.0)  # stricter than we know
    grants = 0

    def limiter():
        return SlidingWindowLimiter(
            limit=5,
            window=10.0,
            key=make_backend.key,
            backend=make_backend(clock),  # one instance per worker, one shared storage
            clock=clock,
            sleep=clock.sleep,
            mode="wait",
            max_wait=1e6,
        )

    async def worker(lim: SlidingWindowLimiter, successes: int) -> None:
        nonlocal grants
        done = 0
        while done < successes:
            await lim.aacquire()  # every attempt, retries included, passes the limiter
            grants += 1
            status, headers = provider.call()
            if status == 429:
                lim.pause_from_headers(headers)
            else:
                done += 1

    async def main():
        await asyncio.gather(*(worker(limiter(), 4) for _ in range(4)))

    asyncio.run(main())
    assert len(provider.accepted) == 16
    assert grants == len(provider.attempts)
    assert provider.refusals, "the provider pushed back at least once"
    for at, retry in provider.refusals:
        assert not [t for t in provider.attempts if at < t < at + retry]
