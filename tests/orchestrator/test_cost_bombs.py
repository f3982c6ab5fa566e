"""A model that answers with a cost bomb costs the sqlgate process nothing before (or after) review.

Real processes: ``sqlgate ask --yes``, ``ask --defer``, ``batch --yes`` and ``serve``, each on
SQLite, DuckDB, PostgreSQL and MariaDB with the risk step on (it always is), the "model" being
the scripted OpenAI-compatible server answering with the bombs of ``cost_bombs.BOMBS``. Each
process is measured from outside (``/proc``): its own peak resident size stays within 300 MB of
what the same command reaches on a harmless statement, and its wall time within two bounded
stages (the estimate before review, the execution after it: each the statement timeout and the
grace after which it is stopped from outside) of its "start": the time it took to get its SQL
from the model, plus what the same command spends after that on a harmless statement (startup
varies by seconds on a busy machine; this keeps it out of the comparison). A batch's estimates
run one after another, so a batch of N bombs gets N + 1 stages; on ``serve`` the time to review
and the time from approval to the end each get twice the timeout (per correction, two stages
more). The planner of SQLite and DuckDB works in
sandbox workers, which die at their bounds; PostgreSQL and MariaDB work under the statement
timeout of the read-only session.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from approvals import SqlApprovalStore, StatementRisk
from tests.orchestrator.cost_bombs import (
    BOMBS,
    QUESTION,
    Measured,
    TreeSampler,
    fill,
    measure,
    measure_together,
)
from tests.orchestrator.cost_bombs import question_for as bomb_question
from tests.scripted_llm.scenarios import (
    Scenario,
    ScenarioScript,
    batch_of,
    reasoning,
    sections_of,
)
from tests.scripted_llm.server import ScriptedLLMServer, ScriptedReply

ROOT = Path(__file__).resolve().parents[2]
SQLGATE = [sys.executable, "-m", "orchestrator.cli"]
TIMEOUT_S = 4.0
# What a bounded stage may take past the timeout before it is stopped from outside: the kill
# grace of the sandbox (``QuerySandbox.kill_grace_s``) and of a server estimate's watchdog.
GRACE_S = min(2.0, max(0.2, 0.25 * TIMEOUT_S))
STAGE_S = TIMEOUT_S + GRACE_S  # one estimate, or one execution
HEADROOM = 300 * 1024 * 1024
HARMLESS = "SELECT c.name FROM customers AS c ORDER BY c.id"
TOKENS = [
    {"token": "analyst-token", "actor": "alice", "role": "analyst"},
    {"token": "rita-token", "actor": "rita", "role": "reviewer"},
    {"token": "rob-token", "actor": "rob", "role": "reviewer"},
]
# What a bomb may end as: stopped, refused, cancelled for want of a second reviewer (a stopped
# estimate is high risk), or answered when the engine itself caps the value (MariaDB's repeat).
ENDINGS = {
    "timed_out",
    "unsafe",
    "cancelled",
    "failed",
    "execution_failed",
    "answered",
    "awaiting_approval",
}


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    fill(url)
    return url


@pytest.fixture
def duckdb_url(tmp_path: Path) -> str:
    url = f"duckdb:///{tmp_path / 'shop.duckdb'}"
    fill(url)
    return url


@pytest.fixture
def postgres_url_filled(postgres_database: str) -> str:
    fill(postgres_database)
    return postgres_database


@pytest.fixture
def mysql_url_filled(mysql_url: str) -> Iterator[str]:
    name = f"sqlgate_bombs_{uuid.uuid4().hex[:10]}"
    server = sa.create_engine(mysql_url)
    with server.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    url = sa.make_url(mysql_url).set(database=name).render_as_string(hide_password=False)
    fill(url)
    try:
        yield url
    finally:
        with server.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        server.dispose()


ENGINES = {
    "sqlite": "sqlite_url",
    "duckdb": "duckdb_url",
    "postgres": "postgres_url_filled",
    "mysql": "mysql_url_filled",
}


@pytest.fixture(params=list(ENGINES))
def target(request: pytest.FixtureRequest) -> tuple[str, str]:
    dialect = request.param
    return dialect, request.getfixturevalue(ENGINES[dialect])


class SqlClock:
    """The scenario replies, noting when each question's SQL was handed out."""

    def __init__(self, script: ScenarioScript) -> None:
        self.script = script
        self.answered: dict[str, float] = {}

    def __call__(self, request: dict[str, Any]) -> ScriptedReply:
        reply = self.script(request)
        if batch_of(request) == "sql":
            now = time.monotonic()
            for _, question, _ in sections_of(request):
                self.answered[question] = now
        return reply

    def after_sql(self, run: Measured, question: str) -> float:
        """Seconds from the moment ``question`` got its SQL to the end of ``run``."""
        return run.ended_at - self.answered[question]


@pytest.fixture
def clock(model: ScriptedLLMServer) -> SqlClock:
    assert isinstance(model.responder, SqlClock)
    return model.responder


@pytest.fixture
def model(target: tuple[str, str]) -> Iterator[ScriptedLLMServer]:
    # A hostile model answers a correction request with its bomb again.
    scenarios = {
        bomb_question(name): Scenario(
            reasoning=reasoning(tables=["customers"]), sql=sql, corrections=[sql, sql]
        )
        for name, sql in BOMBS[target[0]].items()
    }
    scenarios[QUESTION] = Scenario(reasoning=reasoning(tables=["customers"]), sql=HARMLESS)
    with ScriptedLLMServer(SqlClock(ScenarioScript(scenarios))) as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, model: ScriptedLLMServer) -> dict[str, str]:
    policy = tmp_path / "policy.toml"
    policy.write_text(f"statement_timeout = {TIMEOUT_S}\n")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "scripted",
        "SQLGATE_MODEL": "scripted-model",
        "SQLGATE_RATE_LIMIT": "1000/60",
        "SQLGATE_RATE_BACKEND": "memory",
        "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 'state.sqlite3'}",
        "SQLGATE_POLICY": str(policy),
        "SQLGATE_TOKENS_FILE": str(tokens),
    }


def _within_bounds(
    run: Measured,
    after_sql: float,
    start: Measured,
    start_after_sql: float,
    what: str,
    stages: int = 2,
) -> None:
    """Peak within ``HEADROOM`` of the harmless run's; from SQL to end within ``stages`` bounded
    stages (an estimate, an execution: each the timeout and its grace) of the harmless run's."""
    assert "Traceback" not in run.stderr, f"{what}: {run.stderr[-2000:]}"
    grown = run.peak_rss - start.peak_rss
    assert grown <= HEADROOM, (
        f"{what}: the sqlgate process peaked at {run.peak_rss >> 20} MB, "
        f"{grown >> 20} MB above the {start.peak_rss >> 20} MB of a harmless statement"
    )
    assert after_sql <= start_after_sql + stages * STAGE_S, (
        f"{what}: {after_sql:.1f} s from its SQL to its end ({run.wall_s:.1f} s in all); "
        f"a harmless statement {start_after_sql:.1f} s ({start.wall_s:.1f} s in all)"
    )


def _ask_all(
    env: dict[str, str], url: str, questions: list[str], how: str
) -> list[tuple[Measured, dict[str, Any]]]:
    """``sqlgate ask QUESTION --json`` for every question at once, each process measured."""
    commands = [[*SQLGATE, "ask", q, "--db", url, how, "--json"] for q in questions]
    out = []
    for run in measure_together(commands, env, cwd=ROOT):
        try:
            out.append((run, json.loads(run.stdout)))
        except json.JSONDecodeError:
            pytest.fail(f"no JSON from ask {how} ({run.returncode}): {run.stdout!r} {run.stderr!r}")
    return out


@pytest.mark.slow
def test_ask_yes_bounds_every_bomb(
    target: tuple[str, str], env: dict[str, str], clock: SqlClock
) -> None:
    dialect, url = target
    names = list(BOMBS[dialect])
    (start, harmless), *bombs = _ask_all(
        env, url, [QUESTION, *(bomb_question(n) for n in names)], "--yes"
    )
    assert harmless["status"] == "answered", harmless
    for name, (run, result) in zip(names, bombs, strict=True):
        assert result["status"] in ENDINGS, result
        _within_bounds(
            run,
            clock.after_sql(run, bomb_question(name)),
            start,
            clock.after_sql(start, QUESTION),
            f"ask --yes, {dialect} {name}",
            2 * (1 + result["corrections"]),  # each correction is estimated and run again
        )


@pytest.mark.slow
def test_ask_defer_bounds_every_bomb_and_shows_why(
    target: tuple[str, str], env: dict[str, str], clock: SqlClock
) -> None:
    dialect, url = target
    names = list(BOMBS[dialect])
    (start, harmless), *bombs = _ask_all(
        env, url, [QUESTION, *(bomb_question(n) for n in names)], "--defer"
    )
    assert harmless["status"] == "awaiting_approval", harmless
    store = SqlApprovalStore(env["SQLGATE_STATE_URL"])
    stopped = []
    try:
        for name, (run, result) in zip(names, bombs, strict=True):
            _within_bounds(
                run,
                clock.after_sql(run, bomb_question(name)),
                start,
                clock.after_sql(start, QUESTION),
                f"ask --defer, {dialect} {name}",
            )
            if result["status"] == "unsafe":  # refused by the validator: nothing was assessed
                continue
            assert result["status"] == "awaiting_approval", result
            risk = _waiting_risk(store, result["run_id"])
            if risk.estimate_error and "stopped" in risk.estimate_error:
                stopped.append(name)
                assert risk.level == "high"
                assert f"no estimate: {risk.estimate_error}" in risk.reasons
    finally:
        store.close()
    if dialect == "postgres":  # its planner folds repeat() and refuses a value past 1 GB
        assert "huge_string" in stopped, stopped


def _waiting_risk(store: SqlApprovalStore, run_id: str) -> StatementRisk:
    [record] = store.list_batches(run_id=run_id)
    [item] = record.batch.items
    assert item.risk is not None
    return item.risk


@pytest.mark.slow
def test_batch_bounds_every_bomb(
    target: tuple[str, str], env: dict[str, str], clock: SqlClock, tmp_path: Path
) -> None:
    dialect, url = target
    names = list(BOMBS[dialect])

    def batch(questions: list[str], out: str) -> tuple[Measured, list[dict[str, Any]]]:
        file = tmp_path / f"{out}.txt"
        file.write_text("".join(f"{q}\n" for q in questions))
        results = tmp_path / f"{out}.jsonl"
        argv = [*SQLGATE, "batch", str(file), "--db", url, "--out", str(results), "--yes"]
        run = measure(argv, env, cwd=ROOT)
        lines = results.read_text().splitlines() if results.exists() else []
        return run, [json.loads(line) for line in lines]

    start, [harmless] = batch([QUESTION], "harmless")
    assert harmless["status"] == "answered", harmless
    run, records = batch([bomb_question(n) for n in names], "bombs")
    assert sorted(r["question"] for r in records) == sorted(bomb_question(n) for n in names)
    assert {r["status"] for r in records} <= ENDINGS, records
    _within_bounds(
        run,
        clock.after_sql(run, bomb_question(names[0])),
        start,
        clock.after_sql(start, QUESTION),
        f"batch --yes, {dialect}",
        # The gate estimates a batch's statements one after another; they run side by side.
        (len(names) + 1) * (1 + max(r.get("corrections") or 0 for r in records)),
    )


# -- serve ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_serve_bounds_every_bomb_before_and_after_review(
    target: tuple[str, str], env: dict[str, str], tmp_path: Path
) -> None:
    dialect, url = target
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [*SQLGATE, "serve", "--db", url, "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    sampler = TreeSampler(proc.pid)

    def healthy() -> bool:
        assert proc.poll() is None, "the server ended"
        try:
            return httpx.get(f"{base}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def client(token: str) -> httpx.Client:
        return httpx.Client(base_url=base, headers={"authorization": f"Bearer {token}"}, timeout=30)

    try:
        _until(healthy, 60, "the server to answer /health")
        sampler.sample()
        idle = sampler.seen[proc.pid]
        with (
            client("analyst-token") as alice,
            client("rita-token") as rita,
            client("rob-token") as rob,
        ):

            def ask(question: str) -> tuple[str, float]:
                asked = time.monotonic()
                run_id = alice.post("/runs", json={"question": question}).json()["run_id"]

                def waiting() -> bool:
                    sampler.sample()
                    status = alice.get(f"/runs/{run_id}").json()["status"]
                    return status in ("awaiting_approval", "finished")

                _until(waiting, 120, f"{question!r} to reach review")
                return run_id, time.monotonic() - asked

            def approve(run_id: str) -> tuple[float, int]:
                """Approve every batch of the run (two reviewers: a high-risk one needs two)
                until it finishes; the time it took and the corrections it made."""
                decided = time.monotonic()

                def finished() -> dict[str, Any] | None:
                    for reviewer in (rita, rob):
                        pending = reviewer.get("/approvals", params={"run_id": run_id}).json()
                        for summary in pending:
                            batch = reviewer.get(f"/approvals/{summary['batch_id']}").json()
                            reviewer.post(
                                f"/approvals/{summary['batch_id']}/decision",
                                json={"decisions": {c: "approve" for c in batch["pending_ids"]}},
                            )
                    sampler.sample()
                    run = alice.get(f"/runs/{run_id}").json()
                    return run if run["status"] == "finished" else None

                result = _until(finished, 180, f"{run_id} to finish")["results"][0]
                assert result["status"] in ENDINGS, result
                return time.monotonic() - decided, int(result.get("corrections") or 0)

            harmless, start_review = ask(QUESTION)
            start_finish, _ = approve(harmless)
            late = []
            for name in BOMBS[dialect]:
                run_id, to_review = ask(bomb_question(name))
                # one stage before review (the estimate), twice the timeout allowed
                assert to_review <= start_review + 2 * TIMEOUT_S, (name, to_review, start_review)
                to_finish, corrections = approve(run_id)
                # the execution, and per correction one more estimate and execution
                allowed = start_finish + 2 * TIMEOUT_S + 2 * STAGE_S * corrections
                if to_finish > allowed:
                    late.append((name, round(to_finish, 1), round(allowed, 1)))
        assert healthy()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
    grown = sampler.seen[proc.pid] - idle
    assert grown <= HEADROOM, f"serve grew {grown >> 20} MB above its idle {idle >> 20} MB"
    if dialect == "mysql" and [name for name, *_ in late] == ["regex"]:
        # Execution, after review: MariaDB does not stop a REGEXP match at max_statement_time
        # (nor at KILL QUERY), and the executor waits for the server. The estimate before
        # review is stopped on time (checked above); the executor has no watchdog yet.
        pytest.xfail(f"MariaDB ran an approved REGEXP past its time limit: {late}")
    assert not late, f"executions past their bound (name, took, allowed): {late}"
