"""Wait mode admits the waiters of one limiter in arrival order, within max_wait."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ratelimit import ManualClock, RateLimitExceeded, SlidingWindowLimiter
from ratelimit.line import WaitingLine


def test_threads_are_admitted_in_arrival_order():
    lim = SlidingWindowLimiter(limit=1, window=0.03, mode="wait", max_wait=5.0)
    lim.acquire()
    order: list[int] = []

    def waiter(i: int) -> None:
        lim.acquire()
        order.append(i)

    threads = []
    for i in range(6):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.004)  # arrivals 4 ms apart, all before the first slot frees
    for t in threads:
        t.join()
    assert order == list(range(6))


def test_tasks_are_admitted_in_arrival_order_on_a_virtual_clock():
    clock = ManualClock()
    lim = SlidingWindowLimiter(
        limit=2, window=10.0, clock=clock, sleep=clock.sleep, mode="wait", max_wait=1e6
    )
    order: list[int] = []

    async def waiter(i: int) -> None:
        grant = await lim.aacquire()
        order.append((i, grant.stamp))

    async def main():
        await asyncio.gather(*(waiter(i) for i in range(7)))

    asyncio.run(main())
    assert [i for i, _ in order] == list(range(7))
    assert [stamp for _, stamp in order] == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0, 30.0]


def test_a_queued_waiter_still_honours_max_wait():
    lim = SlidingWindowLimiter(limit=1, window=60.0, mode="wait", max_wait=0.1)
    lim.acquire()
    started = time.monotonic()
    with pytest.raises(RateLimitExceeded):
        lim.acquire()  # refused at once: 60 s > max_wait
    assert time.monotonic() - started < 0.1


def test_threads_and_tasks_share_one_line():
    line = WaitingLine()
    assert line.join()
    order: list[str] = []

    def thread_waiter():
        assert line.join(timeout=5)
        order.append("thread")
        line.leave()

    async def task_waiter():
        assert await line.ajoin(timeout=5)
        order.append("task")
        line.leave()

    t = threading.Thread(target=thread_waiter)
    t.start()
    while len(line) < 1:
        time.sleep(0.001)

    async def main():
        task = asyncio.ensure_future(task_waiter())
        while len(line) < 2:
            await asyncio.sleep(0.001)
        line.leave()  # the thread is first, then the task
        await asyncio.to_thread(t.join)
        await task

    asyncio.run(main())
    assert order == ["thread", "task"]


def test_a_waiter_that_times_out_leaves_the_line():
    line = WaitingLine()
    assert line.join()
    assert line.join(timeout=0.01) is False
    assert len(line) == 0
    line.leave()
    assert line.join(timeout=0.01) is True


def test_a_cancelled_task_passes_its_turn_on():
    line = WaitingLine()

    async def main():
        assert await line.ajoin()
        queued = asyncio.ensure_future(line.ajoin())
        await asyncio.sleep(0)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        line.leave()
        assert await line.ajoin(timeout=0.1)

    asyncio.run(main())
