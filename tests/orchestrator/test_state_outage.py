"""The state database restarts under a running ``batch --distributed`` (a private PostgreSQL
cluster, stopped with every connection ended and started again): the client and the workers wait
for it and go on, every question is answered once, and PostgreSQL (the target, counting scans of
each question's table) ran each statement once. Past ``SQLGATE_STATE_PATIENCE`` a command stops
with exit 10 and one sentence."""

from __future__ import annotations

import json
import os
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
from tests.orchestrator.own_postgres import OwnPostgres
from tests.scripted_llm.server import ScriptedLLMServer

COUNT = 100


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    server.start()
    yield server
    server.destroy()


@pytest.fixture
def counted_db(postgres_url: str) -> Iterator[str]:
    url = create_counted_database(postgres_url, COUNT)
    yield url
    drop_counted_database(postgres_url, url)


@pytest.mark.slow
def test_a_state_database_restart_mid_batch_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path, own_postgres: OwnPostgres, redis_url: str, counted_db: str
) -> None:
    questions, out = tmp_path / "questions.txt", tmp_path / "out.jsonl"
    questions.write_text("\n".join(question_of(n) for n in range(1, COUNT + 1)) + "\n")
    state_url = own_postgres.database()
    with ScriptedLLMServer(TimedScript(0.05, counted_scenarios(COUNT))) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=state_url,
            database_url=counted_db,
            model_url=model.base_url,
            lease_s=15.0,
        )
        command = [sys.executable, "-m", "orchestrator.cli", "batch", str(questions)]
        command += ["--db", counted_db, "--out", str(out), "--distributed", "--yes", "--k", "4"]
        try:
            cluster.start_workers(2)
            client = subprocess.Popen(
                command, cwd=ROOT, env=cluster.env, stderr=subprocess.PIPE, text=True
            )
            deadline = time.monotonic() + 240
            # The restart lands while the workers execute: some statements claimed, most not.
            while len(cluster.state.approvals.executions()) < 12:
                assert time.monotonic() < deadline and client.poll() is None, "nothing executed"
                time.sleep(0.05)
            claimed_at_restart = len(cluster.state.approvals.executions())
            down_s = own_postgres.restart(down_s=2.0)
            _, stderr = client.communicate(timeout=300)
            alive = [w.poll() is None for w in cluster.workers]
        finally:
            cluster.stop_workers()

    assert client.returncode == 0, stderr[-3000:]
    assert down_s >= 2.0 and claimed_at_restart < COUNT, "the restart was not mid-batch"
    assert alive == [True, True], "a worker died with the state database"
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == COUNT == len({r["question"] for r in records})
    assert {r["status"] for r in records} == {"answered"}, [
        (r["question"], r["status"]) for r in records if r["status"] != "answered"
    ]
    counts = statement_counts(counted_db, COUNT)
    assert counts == {n: 1 for n in range(1, COUNT + 1)}
    stored = cluster.state.runs.list(limit=1000)
    assert len(stored) == COUNT // 4 and {r["status"] for r in stored} == {"finished"}
    ledger = cluster.state.approvals.executions()
    assert len(ledger) == COUNT and {e.state for e in ledger} == {"done"}
    cluster.state.close()


def test_past_its_patience_a_command_stops_with_exit_10_and_one_sentence(
    own_postgres: OwnPostgres,
) -> None:
    state_url = own_postgres.database()
    env = {**os.environ, "SQLGATE_STATE_URL": state_url, "SQLGATE_STATE_PATIENCE": "2"}
    listed = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "runs", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    own_postgres.stop()
    began = time.monotonic()
    down = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "runs", "list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - began
    assert down.returncode == 10, down.stderr
    message = " ".join(down.stderr.split())
    assert "cannot be reached (tried for 2 s, SQLGATE_STATE_PATIENCE=2)" in message, message
    assert "Traceback" not in down.stderr and message.count("error:") == 1
    assert 2.0 <= took < 30
    own_postgres.start()
