"""Contention alone never refuses a SQLite caller: 6 processes x 4 threads on one file.

Two threads per process acquire fail-fast in a tight loop and two in wait mode, for a few
seconds on a real clock, so the file's write lock is wanted by 24 callers at every instant.
Every ``BackendUnavailable`` is counted (none may happen: nothing is wrong with the file, it is
only busy), and the commit stamps never put more than the limit in any window.

The backends get a 1 s timeout, a fifth of the default: each transaction holds the file for
well under a millisecond, so a caller waiting that long is being starved, not queued. (SQLite's
own busy handler, which polls every 100 ms after a few tries, was refused 29 times in 19,498
tries of this test at 1 s.)
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

from ratelimit_workers import hammer_counting_refusals, ready
from windows import max_in_window

from ratelimit import SQLiteBackend

PROCESSES, DURATION = 6, 4.0
LIMIT, WINDOW = 50, 0.2
TIMEOUT = 1.0


def test_six_processes_of_four_threads_are_never_refused_for_a_busy_file(tmp_path):
    path = str(tmp_path / "limits.sqlite")
    SQLiteBackend(path).setup()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(PROCESSES, mp_context=context) as pool:
        assert all(f.result(timeout=60) for f in [pool.submit(ready) for _ in range(PROCESSES)])
        start_at = time.time() + 0.5
        futures = [
            pool.submit(
                hammer_counting_refusals,
                "sqlite",
                path,
                "contended",
                LIMIT,
                WINDOW,
                start_at,
                DURATION,
                seed,
                timeout=TIMEOUT,
            )
            for seed in range(PROCESSES)
        ]
        results = [f.result(timeout=120) for f in futures]

    stamps = [stamp for got, _, _ in results for stamp in got]
    tries = sum(n for _, n, _ in results)
    unavailable = [message for _, _, refused in results for message in refused]
    assert unavailable == [], f"{len(unavailable)} of {tries} tries refused: {unavailable[:3]}"
    assert tries > 10 * len(stamps)  # the fail-fast threads kept the file busy
    assert len(stamps) >= DURATION / WINDOW * LIMIT * 0.8
    assert max_in_window(stamps, WINDOW) == LIMIT
