import asyncio
import threading

import pytest

from ratelimit import ManualClock


def test_sleep_advances_and_records():
    clock = ManualClock(start=3.0)
    clock.sleep(2.5)
    clock.sleep(0)
    assert clock() == 5.5
    assert clock.slept == [2.5, 0.0]


def test_advance_and_set_never_go_backwards():
    clock = ManualClock()
    clock.advance(1)
    clock.set(4)
    assert clock.now() == 4.0
    with pytest.raises(ValueError):
        clock.set(3)
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.sleep(-1)
    assert clock.slept == []


def test_async_sleep_advances():
    clock = ManualClock()
    asyncio.run(clock.asleep(7))
    assert clock() == 7.0 and clock.slept == [7.0]


def test_threads_sleeping_add_up():
    clock = ManualClock()
    threads = [
        threading.Thread(target=lambda: [clock.sleep(0.5) for _ in range(100)]) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock() == 400.0
