"""Real clock, tiny window: 4 processes x 4 threads hammer one shared backend.

Bursts and Poisson arrivals together; on PostgreSQL and Redis one process's clock is 300 ms
ahead and another's 300 ms behind (they share a server clock, so it must not matter; SQLite
processes share the host clock by definition). The commit stamps never put N + 1 grants in a
window, and the times the callers saw their grants return do not either, within the margin.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import pytest
from ratelimit_workers import hammer, ready
from windows import max_in_window

LIMIT, WINDOW, MARGIN = 5, 0.5, 0.05
PROCESSES, DURATION = 4, 1.5


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(PROCESSES, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert all(f.result(timeout=60) for f in [pool.submit(ready) for _ in range(PROCESSES)])
        yield pool


def test_processes_sharing_a_backend_never_overrun(make_shared_backend, pool):
    make_shared_backend().setup()
    kind = make_shared_backend.kind
    skews = [0.3, -0.3, 0.0, 0.0] if kind != "sqlite" else [0.0] * PROCESSES
    start_at = time.time() + 0.3  # every process starts together
    futures = [
        pool.submit(
            hammer,
            kind,
            make_shared_backend.location,
            make_shared_backend.key,
            LIMIT,
            WINDOW,
            MARGIN,
            start_at,
            DURATION,
            skews[i],
            i,
        )
        for i in range(PROCESSES)
    ]
    per_process = [f.result(timeout=60) for f in futures]

    grants = [g for results in per_process for g in results]
    assert len(grants) >= DURATION / (WINDOW + MARGIN) * LIMIT - LIMIT
    stamps = [stamp for stamp, _ in grants]
    returns = [returned for _, returned in grants]
    # exact on commit stamps over the enforced window (window + margin)
    assert max_in_window(stamps, WINDOW + MARGIN) == LIMIT
    # callers saw each grant `delay` after its commit; within the margin, the window holds
    delay = max(returned - stamp for stamp, returned in grants)
    assert delay >= 0
    assert max_in_window(returns, WINDOW + MARGIN - delay) <= LIMIT
    if delay <= MARGIN:
        assert max_in_window(returns, WINDOW) <= LIMIT
