"""A dead model endpoint fails a run fast: one call's retries, nothing charged, every question told.

The endpoint is a local port nothing listens on (connections are refused at once); time is a
manual clock, so the backoff between attempts is counted, not slept.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx2

from approvals import ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline, PipelineConfig
from orchestrator.core.result import RunStatus
from ratelimit import ManualClock, SlidingWindowLimiter


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _pipeline(demo_db: Path, limiter: SlidingWindowLimiter, clock: ManualClock) -> Pipeline:
    llm = LLMClient(
        LLMSettings(model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_attempts=4),
        limiter=limiter,
        http_client=httpx2.Client(),
        sleep=clock.sleep,
    )
    return Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}"), llm, ApproveAll(), config=PipelineConfig(k=10)
    )


def test_a_batch_stops_after_the_first_calls_retries_with_every_question_failed(
    demo_db: Path,
) -> None:
    clock = ManualClock()
    limiter = SlidingWindowLimiter(limit=5, window=60.0, clock=clock, sleep=clock.sleep)
    pipeline = _pipeline(demo_db, limiter, clock)
    questions = [f"How many orders were placed in month {m}?" for m in range(1, 31)]
    started = clock()

    results = pipeline.run_batch(questions)

    assert len(results) == 30
    assert {r.status for r in results} == {RunStatus.LLM_ERROR}
    assert all(r.error and "failed 4 times" in r.error.message for r in results)
    assert pipeline.llm.calls == 1  # the batch was not split into 30 more doomed calls
    assert len(clock.slept) == 3 and clock() - started < 15.0  # one call's backoff, no more
    assert limiter.usage().used == 0  # refused connections spent nothing
    assert pipeline.llm.http_requests == 0


def test_the_next_question_is_not_rate_limited_by_a_dead_endpoint(demo_db: Path) -> None:
    clock = ManualClock()
    limiter = SlidingWindowLimiter(limit=5, window=60.0, clock=clock, sleep=clock.sleep)
    pipeline = _pipeline(demo_db, limiter, clock)

    first = pipeline.ask("How many customers are there?")
    second = pipeline.ask("How many customers are there?")

    # Fail-fast limiter, 5 per minute: had the 8 attempts been charged, the second question
    # would have ended rate_limited; it reaches the endpoint (and finds it dead) instead.
    assert first.status == second.status == RunStatus.LLM_ERROR
    assert second.error is not None and second.error.code == "llm_unavailable"
