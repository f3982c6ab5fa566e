"""kill -9 of the process advancing a run, at each stage; another process recovers it.

Every process here is real (``tests.orchestrator.lease_worker``), the model is the scripted
OpenAI-compatible server on 127.0.0.1, the database the demo SQLite file, the state database a
SQLite file shared by all of them. Each run must end exactly once with the right status, and no
approved statement may run twice (the execution ledger counts every claim; on PostgreSQL the
database's own scan counter counts every execution).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from approvals import ApprovalGate, Approve
from orchestrator.core.state_db import StateDatabase
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 1.0

pytestmark = pytest.mark.slow


class Runs:
    """Worker processes on one state database, one model server and one database."""

    def __init__(self, tmp_path: Path, demo_url: str, model: ScriptedLLMServer) -> None:
        self.tmp_path = tmp_path
        self.state_url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
        self.demo_url = demo_url
        self.model = model
        self.state = StateDatabase(self.state_url)
        self.state.setup()

    def _args(self, command: str, run_id: str, question: str | None, **options: Any) -> list[str]:
        args = [sys.executable, "-m", "tests.orchestrator.lease_worker", command, run_id]
        if question is not None:
            args.append(question)
        args += ["--state", self.state_url, "--db", self.demo_url]
        args += ["--model-url", self.model.base_url]
        options.setdefault("lease", LEASE_S)
        for name, value in options.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        return args

    def run(self, command: str, run_id: str, question: str | None = None) -> list[dict[str, Any]]:
        done = subprocess.run(
            self._args(command, run_id, question),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def killed(
        self,
        command: str,
        run_id: str,
        question: str | None = None,
        *,
        hold_at: str | None = None,
        signal_at: str | None = None,
        after_s: float = 0.0,
        lease: float = LEASE_S,
    ) -> None:
        """Start a worker, wait until it reports the stage, then kill -9 it."""
        flag = self.tmp_path / f"signal-{time.monotonic_ns()}"
        options: dict[str, Any] = {"signal": flag, "lease": lease}
        if hold_at:
            options["hold_at"] = hold_at
        if signal_at:
            options["signal_at"] = signal_at
        proc = subprocess.Popen(
            self._args(command, run_id, question, **options),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not flag.exists():
            if proc.poll() is not None:
                raise AssertionError(f"the worker ended early: {proc.stderr.read()[-2000:]}")
            assert time.monotonic() < deadline, "the worker never reached the stage"
            time.sleep(0.02)
        time.sleep(after_s)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL

    def approve_all(self, run_id: str) -> None:
        [record] = self.state.approvals.pending_batches(run_id=run_id)
        gate = ApprovalGate(reviewer=None, validate=_Accepted, store=self.state.approvals)
        gate.submit(
            record.batch_id, {i.call_id: Approve() for i in record.batch.pending}, actor="alice"
        )

    def executions(self, run_id: str) -> list[str]:
        return [e.state for e in self.state.approvals.executions(run_id=run_id)]

    def wait_for_expiry(self) -> None:
        time.sleep(LEASE_S + 0.3)


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


@pytest.fixture
def runs(tmp_path: Path, demo_url: str, scripted_server: ScriptedLLMServer) -> Runs:
    return Runs(tmp_path, demo_url, scripted_server)


@pytest.mark.parametrize("stage", ["reasoning", "exploring schema"])
def test_killed_before_the_gate_the_run_starts_again_in_another_process(
    runs: Runs, stage: str
) -> None:
    runs.killed("start", "run_a", sc.PRODUCT_COUNT, hold_at=stage)
    stopped = runs.state.runs.load("run_a")
    assert stopped.status == "running" and stopped.owner is not None

    runs.wait_for_expiry()
    [paused] = runs.run("recover", "run_a")

    assert paused["status"] == "awaiting_approval"
    assert any("started again" in w for w in paused["warnings"])
    taken = runs.state.runs.load("run_a")
    assert (taken.status, taken.owner, taken.takeovers) == ("awaiting_approval", None, 1)
    assert runs.state.runs.expired() == []

    runs.approve_all("run_a")
    [done] = runs.run("resume", "run_a")
    assert done["status"] == "answered" and done["row_count"] == 8
    assert runs.executions("run_a") == ["done"]
    assert runs.state.runs.load("run_a").status == "finished"


def test_killed_at_the_gate_nothing_is_needed(runs: Runs) -> None:
    [paused] = runs.run("start", "run_g", sc.PRODUCT_COUNT)
    assert paused["status"] == "awaiting_approval"
    runs.wait_for_expiry()

    assert runs.state.runs.expired() == []  # paused runs hold no lease
    runs.approve_all("run_g")
    [done] = runs.run("resume", "run_g")
    assert done["status"] == "answered"
    assert runs.executions("run_g") == ["done"]


def test_killed_while_executing_the_statement_is_in_doubt_never_run_twice(runs: Runs) -> None:
    [paused] = runs.run("start", "run_x", sc.SLOW_QUERY)
    assert paused["status"] == "awaiting_approval"
    runs.approve_all("run_x")

    runs.killed("resume", "run_x", signal_at="running SQL", after_s=0.5)
    assert runs.executions("run_x") == ["sent"]
    assert runs.state.runs.load("run_x").status == "resuming"

    runs.wait_for_expiry()
    [doubt] = runs.run("recover", "run_x")

    assert doubt["status"] == "execution_in_doubt"
    assert doubt["error"]["code"] == "execution_in_doubt"
    assert runs.executions("run_x") == ["in_doubt"]  # one claim, never run again
    assert runs.state.runs.load("run_x").status == "finished"
    [again] = runs.run("resume", "run_x")
    assert again["status"] == "execution_in_doubt"


def test_killed_while_writing_the_answer_the_answer_is_written_from_the_results(
    runs: Runs,
) -> None:
    runs.run("start", "run_w", sc.PRODUCT_COUNT)
    runs.approve_all("run_w")

    runs.killed("resume", "run_w", hold_at="writing the answer")
    assert runs.executions("run_w") == ["done"]

    runs.wait_for_expiry()
    [done] = runs.run("recover", "run_w")

    assert done["status"] == "answered" and done["row_count"] == 8 and done["answer"]
    assert runs.executions("run_w") == ["done"]  # the statement ran once
    assert runs.state.runs.load("run_w").takeovers == 1


def test_a_live_lease_is_not_taken_over(runs: Runs) -> None:
    runs.killed("start", "run_l", sc.PRODUCT_COUNT, hold_at="reasoning", lease=60.0)
    # Killed just now: its 60-second lease has not expired, so nobody may take the run.
    done = subprocess.run(
        runs._args("recover", "run_l", None), cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode != 0 and "not stopped" in done.stderr
    assert runs.state.runs.load("run_l").takeovers == 0


def _seq_scans(admin: sa.Engine, table: str) -> int:
    """Sequential scans of ``table`` counted by PostgreSQL (a fresh statistics snapshot)."""
    with admin.connect() as conn:
        conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        return int(
            conn.execute(
                sa.text("SELECT seq_scan FROM pg_stat_user_tables WHERE relname = :t"), {"t": table}
            ).scalar_one()
        )


def _settled_seq_scans(admin: sa.Engine, database: str, table: str) -> int:
    """The count once no statement runs on ``database`` any more (a killed client's statement
    goes on until the server notices; its backend reports its scans when it ends)."""
    deadline = time.monotonic() + 90
    while True:
        with admin.connect() as conn:
            busy = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = :d "
                    "AND pid <> pg_backend_pid() AND state = 'active'"
                ),
                {"d": database},
            ).scalar_one()
        if not busy:
            break
        assert time.monotonic() < deadline, "a statement is still running on the database"
        time.sleep(0.2)
    # A backend hands its counts to the shared statistics at most once a second, and when it ends:
    # read until two readings a second apart agree.
    last, count = -1, _seq_scans(admin, table)
    while count != last:
        time.sleep(1.1)
        last, count = count, _seq_scans(admin, table)
    return count


def test_killed_while_executing_on_postgresql_the_database_saw_the_statement_once(
    tmp_path: Path, postgres_database: str, scripted_server: ScriptedLLMServer
) -> None:
    """The same kill, counted by the database itself: PostgreSQL's own scan counter of the one
    table the approved statement reads moves by exactly one execution's worth, not two."""
    target = sa.create_engine(postgres_database, isolation_level="AUTOCOMMIT")
    with target.connect() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE order_items (order_item_id INTEGER PRIMARY KEY, order_id INTEGER, "
            "product_id INTEGER, quantity INTEGER)"
        )
        # 500 rows: the statement counts 500^3 pairs, seconds of work, so the kill lands in it.
        conn.exec_driver_sql(
            "INSERT INTO order_items SELECT n, n / 3, mod(n, 40), 1 + mod(n, 5) "
            "FROM generate_series(1, 500) AS n"
        )
        # No parallel workers: each scan in the plan is then counted once per execution.
        conn.exec_driver_sql("ALTER TABLE order_items SET (parallel_workers = 0)")
        conn.exec_driver_sql("ANALYZE order_items")
    database = sa.make_url(postgres_database).database
    assert database
    before = _settled_seq_scans(target, database, "order_items")
    with target.connect() as conn:  # one execution, from here, to learn what it costs in scans
        conn.exec_driver_sql(sc.SCENARIOS[sc.SLOW_QUERY].sql or "")
    one_execution = _settled_seq_scans(target, database, "order_items") - before
    assert one_execution >= 1

    runs = Runs(tmp_path, postgres_database, scripted_server)
    [paused] = runs.run("start", "run_pg", sc.SLOW_QUERY)
    assert paused["status"] == "awaiting_approval"
    runs.approve_all("run_pg")
    at_the_gate = _settled_seq_scans(target, database, "order_items")

    runs.killed("resume", "run_pg", signal_at="running SQL", after_s=0.5)
    assert runs.executions("run_pg") == ["sent"]
    runs.wait_for_expiry()
    [doubt] = runs.run("recover", "run_pg")
    assert doubt["status"] == "execution_in_doubt"
    [again] = runs.run("resume", "run_pg")
    assert again["status"] == "execution_in_doubt"

    ran = _settled_seq_scans(target, database, "order_items") - at_the_gate
    assert ran == one_execution, f"{ran} scans after the gate; one execution is {one_execution}"
    assert runs.executions("run_pg") == ["in_doubt"]
    target.dispose()
