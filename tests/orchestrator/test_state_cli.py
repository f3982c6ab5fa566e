"""The commands over the state database, as an operator runs them (real processes, the scripted
model server, the demo database): an unusable state database is one sentence and exit 10;
SQLGATE_LEASE is the lease of ask --defer, resume and runs recover; runs recover reports a
corrupt run and goes on with the others (queued ones included); a resumer that lost its run
prints the run's true outcome."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from approvals import ApprovalGate, Approve
from orchestrator.core.checkpoint import StartedCheckpoint
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.runs import runs as runs_table
from orchestrator.core.state_db import StateDatabase
from tests.orchestrator.celery_cluster import TimedScript
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 7.0


def _sqlgate(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- an unusable state database ------------------------------------------------------------------


def _garbage(folder: Path) -> str:
    (folder / "garbage.sqlite").write_bytes(b"this is not a database at all" * 100)
    return f"sqlite:///{folder / 'garbage.sqlite'}"


def _directory(folder: Path) -> str:
    (folder / "a_directory").mkdir()
    return f"sqlite:///{folder / 'a_directory'}"


def _newer(folder: Path) -> str:
    url = f"sqlite:///{folder / 'newer.sqlite'}"
    state = StateDatabase(url)
    state.setup()
    with state.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE sqlgate_schema SET version = 99 WHERE component = 'runs'")
    state.close()
    return url


def _read_only(folder: Path) -> str:
    path = folder / "read_only.sqlite"
    state = StateDatabase(f"sqlite:///{path}")
    state.approvals.setup()  # the other components are still to be created: a write
    state.close()
    path.chmod(0o444)
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes whatever the mode: make the file immutable as well
        if (
            shutil.which("chattr") is None
            or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode
        ):
            pytest.skip("running as root without chattr: no way to make a file read-only")
    return f"sqlite:///{path}"


CASES = {
    "garbage file": (_garbage, "file is not a database"),
    "directory": (_directory, "unable to open database file"),
    "notaurl": (lambda _: "notaurl", "is not one sqlgate can open"),
    "foo://": (lambda _: "foo://", "is not one sqlgate can open"),
    "unreachable postgresql": (
        lambda _: "postgresql+psycopg://sqlgate@127.0.0.1:9/state",
        "cannot be reached (tried for 0 s, SQLGATE_STATE_PATIENCE=0)",
    ),
    "newer schema": (_newer, "upgrade sqlgate"),
    "read-only file": (_read_only, "readonly database"),
}


@pytest.fixture
def unusable_folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "state"
    folder.mkdir()
    yield folder
    folder.chmod(0o755)
    for path in folder.iterdir():
        if os.geteuid() == 0 and shutil.which("chattr"):
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)


#: Every case with ``runs list``; three of them with the other commands too.
PAIRS = [(case, ["runs", "list"]) for case in CASES] + [
    (case, command)
    for case in ("garbage file", "newer schema", "notaurl")
    for command in (
        ["runs", "recover"],
        ["resume", "run_x"],
        ["approvals", "list"],
        ["ask", "How many products are there?", "--defer", "--db", "sqlite:///x.db"],
        ["worker"],
    )
]


@pytest.mark.parametrize(
    ("case", "command"),
    [pytest.param(case, command, id=f"{case} {' '.join(command[:2])}") for case, command in PAIRS],
)
def test_an_unusable_state_database_is_one_sentence_and_exit_10(
    case: str, command: list[str], unusable_folder: Path
) -> None:
    make, expected = CASES[case]
    env = {**os.environ, "SQLGATE_STATE_URL": make(unusable_folder)}
    env["SQLGATE_BROKER_URL"] = "redis://127.0.0.1:9/0"  # a worker opens the state first
    env["SQLGATE_STATE_PATIENCE"] = "0"  # waiting for a server that comes back: test_state_outage

    done = _sqlgate(env, *command)

    output = done.stdout + done.stderr
    assert done.returncode == 10, output
    assert "Traceback" not in output
    message = " ".join(done.stderr.split())
    assert message.startswith("error: ") and message.count("error:") == 1, message
    assert expected in message, message
    assert message.rstrip(".").count(". ") == 0, message  # one sentence


# -- runs against the scripted model ---------------------------------------------------------------


class LeaseWatch:
    """Reads the runs table every 20 ms while a command runs: the longest lease left seen."""

    def __init__(self, state: StateDatabase, *, ignore_owner: str | None = None) -> None:
        self.state = state
        self.ignore_owner = ignore_owner
        self.left: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> LeaseWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        query = sa.select(runs_table.c.lease_expires_at).where(
            runs_table.c.status.in_(("running", "resuming")), runs_table.c.owner.is_not(None)
        )
        if self.ignore_owner is not None:  # a stopped process's lease, expired on purpose
            query = query.where(runs_table.c.owner != self.ignore_owner)
        while not self._stop.wait(0.02):
            with self.state.engine.connect() as conn:
                expiries = conn.execute(query).scalars().all()
            now = datetime.now(UTC)
            for expiry in expiries:
                moment = expiry if expiry.tzinfo else expiry.replace(tzinfo=UTC)
                self.left.append((moment - now).total_seconds())


@pytest.fixture
def slow_model() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(TimedScript(0.8)) as server:
        yield server


@pytest.fixture
def operator_env(tmp_path: Path, slow_model: ScriptedLLMServer, demo_db: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 'state.sqlite'}",
        "OPENAI_BASE_URL": slow_model.base_url,
        "OPENAI_API_KEY": "scripted",
        "SQLGATE_MODEL": "sqlgate-scripted",
        "SQLGATE_DB": f"sqlite:///{demo_db}",
        "SQLGATE_LEASE": str(LEASE_S),
    }
    env.pop("SQLGATE_BROKER_URL", None)
    return env


def _approve(state: StateDatabase, run_id: str) -> None:
    [record] = state.approvals.pending_batches(run_id=run_id)
    gate = ApprovalGate(reviewer=None, validate=_Accepted, store=state.approvals)
    gate.submit(record.batch_id, {i.call_id: Approve() for i in record.batch.pending}, actor="rita")


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def _assert_lease(left: list[float]) -> None:
    assert left, "no lease was ever seen"
    # SQLGATE_LEASE=7: never more than 7 s left (the default is 30), renewed before it ran out.
    assert max(left) <= LEASE_S + 0.5 and min(left) > 0, (min(left), max(left))


@pytest.mark.slow
def test_ask_defer_and_resume_hold_leases_of_sqlgate_lease(operator_env: dict[str, str]) -> None:
    state = StateDatabase(operator_env["SQLGATE_STATE_URL"])
    state.setup()
    with LeaseWatch(state) as asked:
        paused = _sqlgate(operator_env, "ask", sc.PRODUCT_COUNT, "--defer", "--json")
    assert paused.returncode == 11, paused.stderr[-2000:]  # awaiting approval
    run_id = json.loads(paused.stdout)["run_id"]
    _assert_lease(asked.left)

    _approve(state, run_id)
    with LeaseWatch(state) as resumed:
        done = _sqlgate(operator_env, "resume", run_id, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "answered"
    _assert_lease(resumed.left)
    state.close()


@pytest.mark.slow
def test_runs_recover_reports_a_corrupt_run_and_recovers_the_others_with_sqlgate_lease(
    operator_env: dict[str, str],
) -> None:
    state = StateDatabase(operator_env["SQLGATE_STATE_URL"])
    state.setup()
    url = operator_env["SQLGATE_DB"]
    for run_id in ("run_stopped", "run_corrupt"):
        state.runs.create(
            run_id,
            url,
            StartedCheckpoint(run_id=run_id, questions=[sc.PRODUCT_COUNT]),
            status="running",
            owner="gone:1:abc",
            lease_s=0.001,
            login=DatabaseLogin(""),
        )
    state.runs.create(
        "run_queued",
        url,
        StartedCheckpoint(run_id="run_queued", questions=[sc.COUNT_QUESTIONS[0]]),
        status="queued",
        login=DatabaseLogin(""),
    )
    long_ago = datetime.now(UTC) - timedelta(minutes=5)
    with state.engine.begin() as conn:
        conn.execute(
            runs_table.update()
            .where(runs_table.c.run_id == "run_corrupt")
            .values(checkpoint='{"kind": "started", "questions": [', updated_at=long_ago)
        )
        conn.execute(
            runs_table.update()
            .where(runs_table.c.run_id == "run_queued")
            .values(updated_at=long_ago)
        )

    with LeaseWatch(state, ignore_owner="gone:1:abc") as watch:
        done = _sqlgate(operator_env, "runs", "recover", "--json")

    assert done.returncode == 1, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert [f["run_id"] for f in report["failed"]] == ["run_corrupt"]
    assert "not valid JSON" in report["failed"][0]["error"]
    assert "cannot recover run_corrupt" in " ".join(done.stderr.split())
    recovered = {r["run_id"]: r["statuses"] for r in report["recovered"]}
    assert recovered == {
        "run_stopped": ["awaiting_approval"],
        "run_queued": ["awaiting_approval"],
    }
    assert {state.runs.load(r).status for r in recovered} == {"awaiting_approval"}
    assert state.runs.load("run_stopped").takeovers == 1
    _assert_lease(watch.left)
    state.close()


@pytest.mark.slow
def test_a_resumer_that_lost_its_run_prints_the_outcome_the_other_process_recorded(
    tmp_path: Path, demo_url: str, scripted_server: ScriptedLLMServer
) -> None:
    state_url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    state = StateDatabase(state_url)
    state.setup()

    def worker(command: str, *extra: str, **popen: Any) -> subprocess.Popen[str]:
        args = [sys.executable, "-m", "tests.orchestrator.lease_worker", command, "run_lost"]
        args += [*extra, "--state", state_url, "--db", demo_url]
        # A long lease: no renewal (a write) is in flight when the resumer is frozen below.
        args += ["--model-url", scripted_server.base_url, "--lease", "60", "--timeout", "5"]
        return subprocess.Popen(
            args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
        )

    start = worker("start", sc.SLOW_QUERY)
    start.communicate(timeout=120)
    assert start.returncode == 0
    _approve(state, "run_lost")
    flag = tmp_path / "executing"
    resumer = worker("resume", "--signal-at", "running SQL", "--signal", str(flag))
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert time.monotonic() < deadline and resumer.poll() is None, "never executed"
        time.sleep(0.02)
    time.sleep(0.3)  # the statement was claimed and is running
    os.kill(resumer.pid, signal.SIGSTOP)  # frozen: its lease is no longer renewed...
    try:
        with state.engine.begin() as conn:  # ...until it runs out (here at once, not in 60 s)
            conn.execute(
                runs_table.update()
                .where(runs_table.c.run_id == "run_lost")
                .values(lease_expires_at=datetime.now(UTC) - timedelta(seconds=1))
            )
        taker = worker("recover")
        out, err = taker.communicate(timeout=120)
        assert taker.returncode == 0, err[-2000:]
        [taken] = json.loads(out.strip().splitlines()[-1])
        assert taken["status"] == "execution_in_doubt"
    finally:
        os.kill(resumer.pid, signal.SIGCONT)
    out, err = resumer.communicate(timeout=120)

    assert resumer.returncode == 0, err[-2000:]
    [printed] = json.loads(out.strip().splitlines()[-1])
    assert printed["status"] == "execution_in_doubt", printed
    assert printed["error"] is not None and printed["error"]["code"] == "execution_in_doubt"
    assert state.runs.load("run_lost").status == "finished"
    assert [e.state for e in state.approvals.executions(run_id="run_lost")] == ["in_doubt"]
    state.close()


def test_runs_recover_sends_a_queued_run_nobody_claimed_to_the_workers(
    tmp_path: Path, redis_url: str
) -> None:
    import redis

    from orchestrator.interfaces.tasks import QUEUE
    from tests.orchestrator.celery_cluster import purge_broker

    purge_broker(redis_url)
    env = {
        **os.environ,
        "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 'state.sqlite'}",
        "SQLGATE_BROKER_URL": redis_url,
        "SQLGATE_REQUEUE_AFTER": "60",
    }
    state = StateDatabase(env["SQLGATE_STATE_URL"])
    state.setup()
    for run_id in ("run_lost_message", "run_just_queued"):
        state.runs.create(
            run_id,
            "sqlite:///x.db",
            StartedCheckpoint(run_id=run_id, questions=["q"]),
            status="queued",
            login=DatabaseLogin(""),
        )
    with state.engine.begin() as conn:
        conn.execute(
            runs_table.update()
            .where(runs_table.c.run_id == "run_lost_message")
            .values(updated_at=datetime.now(UTC) - timedelta(minutes=2))
        )

    done = _sqlgate(env, "runs", "recover", "--json")

    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report == {
        "recovered": [
            {
                "run_id": "run_lost_message",
                "previous_owner": None,
                "statuses": ["sent to the workers"],
            }
        ],
        "failed": [],
    }
    messages = redis.Redis.from_url(redis_url).lrange(QUEUE, 0, -1)
    assert len(messages) == 1 and b"run_lost_message" in messages[0]
    assert state.runs.load("run_lost_message").status == "queued"  # a worker claims it
    purge_broker(redis_url)
    state.close()
