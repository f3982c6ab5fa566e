"""Operable workers: several ``sqlgate worker`` processes on one host with RabbitMQ (each its own
node name), and a worker stopped with SIGTERM hands its runs back to the others at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.orchestrator.celery_cluster import ROOT, Cluster, TimedScript
from tests.orchestrator.counted_target import (
    counted_scenarios,
    create_counted_database,
    drop_counted_database,
    question_of,
    statement_counts,
)
from tests.scripted_llm.server import ScriptedLLMServer

pytestmark = pytest.mark.slow

COUNT = 8


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    url = os.environ.get("SQLGATE_TEST_RABBITMQ_URL")
    if not url:
        pytest.skip("SQLGATE_TEST_RABBITMQ_URL is not set: no RabbitMQ server to test against")
    return url


@pytest.fixture
def counted_db(postgres_url: str) -> Iterator[str]:
    url = create_counted_database(postgres_url, COUNT)
    yield url
    drop_counted_database(postgres_url, url)


def _batch(questions: Path, db: str, out: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "orchestrator.cli",
        "batch",
        str(questions),
        "--db",
        db,
    ]
    command += ["--out", str(out), "--distributed", "--yes", "--k", "2"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)


def _questions(tmp_path: Path) -> Path:
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(question_of(n) for n in range(1, COUNT + 1)) + "\n")
    return path


def test_three_workers_on_one_host_with_rabbitmq_all_start_and_share_the_runs(
    tmp_path: Path, postgres_database: str, rabbitmq_url: str, counted_db: str
) -> None:
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(TimedScript(0.2, counted_scenarios(COUNT))) as model:
        cluster = Cluster(
            broker_url=rabbitmq_url,
            state_url=postgres_database,
            database_url=counted_db,
            model_url=model.base_url,
        )
        try:
            cluster.start_workers(3, concurrency=1, log_dir=tmp_path)
            client = _batch(_questions(tmp_path), counted_db, out, cluster.env)
            _, stderr = client.communicate(timeout=300)
            alive = [w.poll() is None for w in cluster.workers]
        finally:
            cluster.stop_workers()
    logs = [(tmp_path / f"worker-{n}.log").read_text() for n in range(3)]
    assert alive == [True, True, True], logs
    assert client.returncode == 0, stderr[-3000:]
    for n, log in enumerate(logs):
        assert "RESOURCE_LOCKED" not in log, log
        assert f"sqlgate-{cluster.workers[n].pid}@" in log, log  # its own node name
    assert statement_counts(counted_db, COUNT) == {n: 1 for n in range(1, COUNT + 1)}
    cluster.state.close()


def test_a_worker_stopped_with_sigterm_hands_its_run_back_before_the_lease_expires(
    tmp_path: Path, postgres_database: str, redis_url: str, counted_db: str
) -> None:
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(TimedScript(1.5, counted_scenarios(COUNT))) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=counted_db,
            model_url=model.base_url,
            lease_s=120.0,  # a takeover before this can only be a run handed back
        )
        try:
            cluster.workers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "orchestrator.cli",
                        "worker",
                        "--concurrency",
                        "4",
                    ]
                    + ["--grace", "0.5", "--name", "leaving", "--loglevel", "WARNING"],
                    cwd=ROOT,
                    env=cluster.env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            client = _batch(_questions(tmp_path), counted_db, out, cluster.env)
            deadline = time.monotonic() + 120
            while not [r for r in cluster.state.runs.list() if r["status"] == "running"]:
                assert time.monotonic() < deadline and client.poll() is None, "no run started"
                time.sleep(0.05)
            stopped_at = time.monotonic()
            cluster.workers[0].send_signal(signal.SIGTERM)
            cluster.start_workers(1, concurrency=4, names=["staying"])
            cluster.workers[0].wait(timeout=60)
            exited = time.monotonic() - stopped_at
            _, stderr = client.communicate(timeout=300)
            took = time.monotonic() - stopped_at
        finally:
            cluster.stop_workers()
    assert cluster.workers[0].returncode == 0
    # The grace (0.5 s), the model call in flight (1.5 s), Celery's own stop: no more calls of
    # a run it handed back, so nothing else keeps it.
    assert exited < 8.0, exited
    assert client.returncode == 0, stderr[-3000:]
    assert took < 120, took  # the runs did not wait for the lease to expire
    stored = cluster.state.runs.list(limit=100)
    assert {r["status"] for r in stored} == {"finished"}
    assert sum(r["takeovers"] for r in stored) >= 1
    assert statement_counts(counted_db, COUNT) == {n: 1 for n in range(1, COUNT + 1)}
    cluster.state.close()
