"""Scale-out on Celery: three real worker processes, one killed mid-way; every run ends once.

Redis is the broker and the limiter's backend, PostgreSQL the state database, the scripted model
server answers after 200 ms. 200 questions in 20 runs of 10 go through the gate (approved from
here, as a reviewer would), execution and the answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.checkpoint import FinishedCheckpoint
from tests.orchestrator.celery_cluster import Cluster, TimedScript, most_in_any_window
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer

pytestmark = pytest.mark.slow

RATE = (30, 5.0)  # 30 requests per 5 s, shared by every worker through Redis


def test_three_workers_one_killed_every_run_ends_once(
    postgres_database: str, redis_url: str, demo_db: Path
) -> None:
    script = TimedScript(latency_s=0.2)
    with ScriptedLLMServer(script) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=f"sqlite:///{demo_db}",
            model_url=model.base_url,
            rate_limit=f"{RATE[0]}/{RATE[1]}",
            rate_backend=redis_url,
        )
        try:
            cluster.start_workers(3)
            runs = {f"run_celery_{n:02d}": n for n in range(20)}
            for run_id, n in runs.items():
                half = sc.COUNT_QUESTIONS[:10] if n % 2 == 0 else sc.COUNT_QUESTIONS[10:]
                cluster.submit(run_id, list(half))

            killed: list[int] = []

            def kill_one_mid_way(finished: int) -> None:
                if not killed and finished >= 3:
                    cluster.kill_worker(0)
                    killed.append(finished)

            cluster.drive(set(runs), timeout_s=300, during=kill_one_mid_way)
        finally:
            cluster.stop_workers()

        assert killed, "the worker was never killed"
        answered = 0
        for run_id in runs:
            stored = cluster.state.runs.load(run_id)
            assert stored.status == "finished"
            assert isinstance(stored.checkpoint, FinishedCheckpoint)
            statuses = {r.status.value for r in stored.checkpoint.results}
            assert statuses <= {"answered", "execution_in_doubt"}, statuses
            answered += sum(r.status.value == "answered" for r in stored.checkpoint.results)
            executions = cluster.state.approvals.executions(run_id=run_id)
            call_ids = [e.call_id for e in executions]
            assert len(call_ids) == len(set(call_ids))  # no statement claimed twice
        # A statement cut short by the kill is in doubt, never rerun: the killed worker (two
        # threads) may have been executing two runs of ten.
        assert answered >= 200 - 2 * 10, answered
        # The limiter held across the three workers. It is exact on its own stamps (taken when a
        # request is admitted); here the arrival times at the model server are what is seen, and
        # they trail admission by the send time of a busy machine, so the window is narrowed by
        # that jitter (0.5 s) rather than the limit widened.
        assert most_in_any_window(script.arrivals, RATE[1] - 0.5) <= RATE[0]
        # ...and it was the limit that held them: some window (widened by the same jitter) saw
        # the full limit, so the bound above was reached, not merely never approached.
        busiest = most_in_any_window(script.arrivals, RATE[1] + 0.5)
        assert busiest >= RATE[0], f"at most {busiest} requests in a window: the limit never bound"
        cluster.state.close()
