"""``sqlgate batch --distributed`` runs every statement once, counted by the target database itself
(``counted_target``: one PostgreSQL table per question, its scans counted by PostgreSQL), when
the client is killed and run again with non-final results in the file, when a broker that keeps
no messages restarts with runs queued, when the broker is down for 5 s, and when a worker is killed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from orchestrator.interfaces.tasks import QUEUE
from tests.orchestrator.celery_cluster import ROOT, Cluster, OwnRedis, TimedScript
from tests.orchestrator.counted_target import (
    counted_scenarios,
    create_counted_database,
    drop_counted_database,
    question_of,
    statement_counts,
)
from tests.scripted_llm.server import ScriptedLLMServer

pytestmark = pytest.mark.slow

COUNT = 20


@pytest.fixture
def counted_db(postgres_url: str) -> Iterator[str]:
    url = create_counted_database(postgres_url, COUNT)
    yield url
    drop_counted_database(postgres_url, url)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    server.stop()


def _batch_args(questions: Path, db: str, out: Path) -> list[str]:
    command = [sys.executable, "-m", "orchestrator.cli", "batch", str(questions)]
    return command + ["--db", db, "--out", str(out), "--distributed", "--yes", "--k", "4"]


def _records(out: Path) -> dict[str, dict]:
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == len({r["question"] for r in records}), "a question written twice"
    return {r["question"]: r for r in records}


def _questions(tmp_path: Path) -> Path:
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(question_of(n) for n in range(1, COUNT + 1)) + "\n")
    return path


def _check_exactly_once(
    cluster: Cluster, counted_db: str, out: Path, *, killed: bool = False
) -> None:
    records = _records(out)
    assert set(records) == {question_of(n) for n in range(1, COUNT + 1)}
    counts = statement_counts(counted_db, COUNT)
    for n in range(1, COUNT + 1):
        status = records[question_of(n)]["status"]
        if killed and status == "execution_in_doubt":
            # Cut short by the kill: it may have run, and it is never run again.
            assert counts[n] <= 1, (n, counts[n])
            continue
        assert status == "answered", records[question_of(n)]
        assert counts[n] == 1, (n, counts[n])
    stored = cluster.state.runs.list(limit=1000)
    assert len(stored) == COUNT // 4 and {r["status"] for r in stored} == {"finished"}


def test_a_killed_client_run_again_with_non_final_results_follows_the_same_runs(
    tmp_path: Path, postgres_database: str, redis_url: str, counted_db: str
) -> None:
    questions, out = _questions(tmp_path), tmp_path / "out.jsonl"
    with ScriptedLLMServer(TimedScript(0.3, counted_scenarios(COUNT))) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=counted_db,
            model_url=model.base_url,
        )
        try:
            cluster.start_workers(2)
            first = subprocess.Popen(
                _batch_args(questions, counted_db, out),
                cwd=ROOT,
                env=cluster.env,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 120
            while not (out.exists() and len(out.read_text().splitlines()) >= 4):
                assert time.monotonic() < deadline and first.poll() is None, "nothing written"
                time.sleep(0.05)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            # The file now says some finished questions failed (as a run that ended llm_error,
            # or an edit, would): the re-run must neither ask them again nor shift any run.
            lines = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            for record in lines[:3]:
                record.update(status="llm_error", error=None, answer=None)
            out.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"question": "cut')
            again = subprocess.run(
                _batch_args(questions, counted_db, out),
                cwd=ROOT,
                env=cluster.env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            cluster.stop_workers()
    assert again.returncode == 0, again.stderr[-3000:]
    assert "recorded by an earlier command" in " ".join(again.stderr.split())
    _check_exactly_once(cluster, counted_db, out)
    cluster.state.close()


def test_a_broker_restart_losing_queued_runs_and_a_5_s_outage_end_every_run_once(
    tmp_path: Path, postgres_database: str, own_redis: OwnRedis, counted_db: str
) -> None:
    questions, out = _questions(tmp_path), tmp_path / "out.jsonl"
    with ScriptedLLMServer(TimedScript(0.0, counted_scenarios(COUNT))) as model:
        cluster = Cluster(
            broker_url=own_redis.url,
            state_url=postgres_database,
            database_url=counted_db,
            model_url=model.base_url,
        )
        env = {**cluster.env, "SQLGATE_REQUEUE_AFTER": "3"}
        try:
            own_redis.stop()  # down when the command starts: it must retry, not exit 2
            down_at = time.monotonic()
            client = subprocess.Popen(
                _batch_args(questions, counted_db, out),
                cwd=ROOT,
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.monotonic() + 120
            while len(cluster.state.runs.list(status="queued")) < COUNT // 4:
                assert time.monotonic() < deadline and client.poll() is None, "runs not queued"
                time.sleep(0.1)
            time.sleep(max(0.0, down_at + 5.0 - time.monotonic()))
            own_redis.start()
            broker = redis.Redis.from_url(own_redis.url)
            while broker.llen(QUEUE) < COUNT // 4:  # the command sent every run once it could
                assert time.monotonic() < deadline and client.poll() is None, "runs not sent"
                time.sleep(0.1)
            own_redis.restart()  # no persistence: the queued runs' messages are lost
            cluster.start_workers(2)
            _, stderr = client.communicate(timeout=300)
        finally:
            cluster.stop_workers()
    assert client.returncode == 0, stderr[-3000:]
    assert "the broker does not answer" in stderr
    _check_exactly_once(cluster, counted_db, out)
    cluster.state.close()


def test_a_killed_worker_its_runs_taken_over_every_statement_once(
    tmp_path: Path, postgres_database: str, redis_url: str, counted_db: str
) -> None:
    questions, out = _questions(tmp_path), tmp_path / "out.jsonl"
    with ScriptedLLMServer(TimedScript(0.3, counted_scenarios(COUNT))) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=counted_db,
            model_url=model.base_url,
            visibility_s=600.0,  # the broker would give the task back only after ten minutes
        )
        try:
            cluster.start_workers(2)
            client = subprocess.Popen(
                _batch_args(questions, counted_db, out),
                cwd=ROOT,
                env=cluster.env,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.monotonic() + 120
            while not (running := [r for r in cluster.state.runs.list() if r["owner"]]):
                assert time.monotonic() < deadline and client.poll() is None, "no run started"
                time.sleep(0.05)
            # The worker advancing that run (its node name, sqlgate-<pid>@<host>, owns the lease).
            pid = int(running[0]["owner"].split("@")[0].removeprefix("sqlgate-"))
            cluster.kill_worker([w.pid for w in cluster.workers].index(pid))
            cluster.start_workers(1)
            _, stderr = client.communicate(timeout=300)
        finally:
            cluster.stop_workers()
    assert client.returncode == 0, stderr[-3000:]
    assert sum(r["takeovers"] for r in cluster.state.runs.list()) >= 1
    _check_exactly_once(cluster, counted_db, out, killed=True)
    cluster.state.close()
