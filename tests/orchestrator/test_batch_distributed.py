"""``sqlgate batch --distributed``: the runs go to real ``sqlgate worker`` processes (Celery, Redis
broker, PostgreSQL state); the command decides at the gate and writes the same records as the
in-process batch."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli.main import app
from tests.orchestrator.celery_cluster import ROOT, Cluster, TimedScript
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer

QUESTIONS = sc.COUNT_QUESTIONS[:12] + [sc.AMBIGUOUS, sc.PRODUCT_COUNT]
#: What must be the same, record by record, whichever process answered.
SAME = ("status", "sql", "row_count", "columns", "rows_preview", "answer")


def _records(path: Path) -> dict[str, dict]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(records) == len({r["question"] for r in records}), "a question written twice"
    return {r["question"]: r for r in records}


def _batch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "batch", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_without_a_broker_the_error_names_the_variable(
    tmp_path: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SQLGATE_BROKER_URL", raising=False)
    questions = tmp_path / "q.txt"
    questions.write_text(sc.PRODUCT_COUNT + "\n")
    out = tmp_path / "out.jsonl"
    args = ["batch", str(questions), "--db", f"sqlite:///{demo_db}", "--out", str(out)]

    result = CliRunner().invoke(app, [*args, "--distributed", "--yes"])

    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "SQLGATE_BROKER_URL" in message and message.count("error:") == 1
    assert not out.exists() or out.read_text() == ""


@pytest.mark.slow
def test_distributed_batch_writes_the_same_records_as_the_in_process_one(
    tmp_path: Path, postgres_database: str, redis_url: str, demo_db: Path
) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(QUESTIONS) + "\n")
    database = f"sqlite:///{demo_db}"
    script = TimedScript(latency_s=0.0)
    with ScriptedLLMServer(script) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=database,
            model_url=model.base_url,
        )
        # The command itself never calls the model: only the workers know where it is.
        env = {
            k: v
            for k, v in cluster.env.items()
            if not k.startswith("OPENAI_") and k != "SQLGATE_MODEL"
        }
        out = tmp_path / "distributed.jsonl"
        args = [str(questions), "--db", database, "--out", str(out), "--yes", "--k", "4"]
        try:
            cluster.start_workers(2)
            done = _batch(env, *args, "--distributed")
            received = len(script.arrivals)
            again = _batch(env, *args, "--distributed")
        finally:
            cluster.stop_workers()
        local_out = tmp_path / "in_process.jsonl"
        local_env = {**cluster.env, "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 'local.db'}"}
        local = _batch(
            local_env, str(questions), "--db", database, "--out", str(local_out), "--yes"
        )

    assert done.returncode == 0, done.stderr[-3000:]
    summary = " ".join(done.stderr.split())
    assert f"{len(QUESTIONS)} result(s) written to" in summary, summary
    assert "4 run(s) of batch" in summary  # 14 questions, 4 a run
    # The calls the model really received (a batched call once), as the model server counted.
    assert f"; {received} distinct call(s) made)" in summary, summary
    rerun = " ".join(again.stderr.split())
    assert again.returncode == 0, rerun[-3000:]
    assert "recorded by an earlier command" in rerun and "0 result(s) written" in rerun
    assert local.returncode == 0, local.stderr[-3000:]

    distributed, in_process = _records(out), _records(local_out)
    assert set(distributed) == set(QUESTIONS) == set(in_process)
    for question in QUESTIONS:
        mine = {k: distributed[question].get(k) for k in SAME}
        theirs = {k: in_process[question].get(k) for k in SAME}
        assert mine == theirs, question
    assert {r["status"] for r in distributed.values()} == {"answered", "needs_clarification"}
    # Every run ended on the workers, each approved statement claimed once.
    stored = cluster.state.runs.list(limit=100)
    assert len(stored) == 4 and {r["status"] for r in stored} == {"finished"}
    claims = [
        e.call_id for r in stored for e in cluster.state.approvals.executions(run_id=r["run_id"])
    ]
    assert len(claims) == len(set(claims)) == len(QUESTIONS) - 1  # the ambiguous one asks back
    cluster.state.close()


@pytest.mark.slow
def test_the_workers_plan_with_the_files_hints(
    tmp_path: Path, postgres_database: str, redis_url: str, demo_db: Path
) -> None:
    hint = "products are the rows of the products table"
    questions = tmp_path / "questions.csv"
    questions.write_text(
        f'question,hint\n"{sc.PRODUCT_COUNT}","{hint}"\n"{sc.COUNT_QUESTIONS[0]}",\n'
    )
    database = f"sqlite:///{demo_db}"
    with ScriptedLLMServer(TimedScript(latency_s=0.0)) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=database,
            model_url=model.base_url,
        )
        out = tmp_path / "distributed.jsonl"
        try:
            cluster.start_workers(1)
            done = _batch(
                cluster.env, str(questions), "--db", database, "--out", str(out), "--yes",
                "--distributed",
            )  # fmt: skip
        finally:
            cluster.stop_workers()
        prompts = [" ".join(m["content"] for m in r["messages"]) for r in model.requests]

    assert done.returncode == 0, done.stderr[-3000:]
    assert "not used" not in done.stderr
    planned = [p for p in prompts if "Hint from the asker:" in p]
    assert len(planned) == 1 and f"Hint from the asker: {hint}" in planned[0]
    assert planned[0].count("Hint from the asker:") == 1  # the other question has none
    cluster.state.close()


@pytest.mark.slow
def test_a_worker_killed_mid_batch_its_runs_are_taken_over_and_every_question_written_once(
    tmp_path: Path, postgres_database: str, redis_url: str, demo_db: Path
) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(sc.COUNT_QUESTIONS) + "\n")
    database = f"sqlite:///{demo_db}"
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(TimedScript(latency_s=0.5)) as model:
        cluster = Cluster(
            broker_url=redis_url,
            state_url=postgres_database,
            database_url=database,
            model_url=model.base_url,
            visibility_s=600.0,  # the broker would give the task back only after ten minutes
        )
        command = [
            sys.executable,
            "-m",
            "orchestrator.cli",
            "batch",
            str(questions),
        ]
        command += ["--db", database, "--out", str(out), "--distributed", "--yes", "--k", "5"]
        try:
            cluster.start_workers(1)
            batch = subprocess.Popen(
                command, cwd=ROOT, env=cluster.env, stderr=subprocess.PIPE, text=True
            )
            deadline = time.monotonic() + 120
            while not any(r["status"] == "running" for r in cluster.state.runs.list()):
                assert time.monotonic() < deadline and batch.poll() is None, "no run started"
                time.sleep(0.05)
            cluster.kill_worker(0)
            cluster.start_workers(1)
            _, stderr = batch.communicate(timeout=150)  # far less than the ten minutes
        finally:
            cluster.stop_workers()

    assert batch.returncode == 0, stderr[-3000:]
    records = _records(out)
    assert set(records) == set(sc.COUNT_QUESTIONS)
    assert {r["status"] for r in records.values()} <= {"answered", "execution_in_doubt"}
    stored = cluster.state.runs.list(limit=100)
    assert {r["status"] for r in stored} == {"finished"}
    assert sum(r["takeovers"] for r in stored) >= 1  # the killed worker's run was taken over
    claims = [
        e.call_id for r in stored for e in cluster.state.approvals.executions(run_id=r["run_id"])
    ]
    assert len(claims) == len(set(claims))
    cluster.state.close()
