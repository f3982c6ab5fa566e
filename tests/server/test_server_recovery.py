"""A server killed (kill -9) with runs in flight: the next server on the same state finishes them.

Real processes: ``sqlgate serve`` twice on one SQLite state file, the scripted model server on
127.0.0.1 answering slowly at first so that runs are in flight when the first server dies.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.core.state_db import StateDatabase
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer, ScriptedReply

ROOT = Path(__file__).resolve().parents[2]
TOKENS = [
    {"token": "analyst-token", "actor": "alice", "role": "analyst"},
    {"token": "reviewer-token", "actor": "rita", "role": "reviewer"},
]

pytestmark = pytest.mark.slow


class SlowFirst:
    """The scenario replies, the first ``slow`` of them held back ``delay_s`` seconds."""

    def __init__(self, slow: int, delay_s: float) -> None:
        self.script = ScenarioScript(SCENARIOS)
        self.slow = slow
        self.delay_s = delay_s

    def __call__(self, request: dict[str, Any]) -> ScriptedReply:
        reply = self.script(request)
        if self.slow > 0:
            self.slow -= 1
            return dataclasses.replace(reply, delay_s=self.delay_s)
        return reply


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(self, tmp_path: Path, demo_db: Path, model: ScriptedLLMServer) -> None:
        tokens = tmp_path / "tokens.json"
        tokens.write_text(json.dumps(TOKENS))
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 'state.sqlite3'}",
            "SQLGATE_TOKENS_FILE": str(tokens),
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "scripted",
            "SQLGATE_MODEL": "sqlgate-scripted",
            "SQLGATE_RATE_LIMIT": "1000/60",
            "SQLGATE_RATE_BACKEND": "memory",
            "SQLGATE_LEASE": "1",
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orchestrator.cli",
                "serve",
                "--db",
                f"sqlite:///{demo_db}",
            ]
            + ["--port", str(self.port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"server-{self.port}.log", "w"),  # noqa: SIM115
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base_url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, "the server did not start"
            assert time.monotonic() < deadline, "the server did not answer /health"
            time.sleep(0.1)

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, headers={"authorization": f"Bearer {token}"}, timeout=10
        )

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def model() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(SlowFirst(slow=3, delay_s=30.0)) as server:
        yield server


def _until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_runs_in_flight_when_the_server_dies_are_finished_by_the_next_one(
    tmp_path: Path, demo_db: Path, model: ScriptedLLMServer
) -> None:
    first = Server(tmp_path, demo_db, model)
    try:
        with first.client("analyst-token") as alice:
            run_ids = [
                alice.post("/runs", json={"questions": [q]}).json()["run_id"]
                for q in (sc.PRODUCT_COUNT, sc.TOP_CATEGORIES, sc.SALES_BY_REGION)
            ]
        # Every run is waiting on its (slow) reasoning call when the server dies.
        _until(lambda: len(model.requests) >= 3, 60, "three reasoning requests")
        first.kill()
    finally:
        first.stop()

    state = StateDatabase(f"sqlite:///{tmp_path / 'state.sqlite3'}")
    assert {state.runs.load(r).status for r in run_ids} <= {"queued", "running"}

    second = Server(tmp_path, demo_db, model)
    try:
        with second.client("reviewer-token") as rita, second.client("analyst-token") as alice:

            def all_finished() -> list[dict[str, Any]] | None:
                # The reviewer approves whatever waits (a correction opens a second cycle).
                for summary in rita.get("/approvals").json():
                    if summary["run_id"] in run_ids:
                        batch = rita.get(f"/approvals/{summary['batch_id']}").json()
                        decisions = {call_id: "approve" for call_id in batch["pending_ids"]}
                        rita.post(
                            f"/approvals/{summary['batch_id']}/decision",
                            json={"decisions": decisions},
                        )
                runs = [alice.get(f"/runs/{r}").json() for r in run_ids]
                return runs if all(r["status"] == "finished" for r in runs) else None

            runs = _until(all_finished, 120, "every run to finish")
    finally:
        second.stop()

    for run in runs:
        [result] = run["results"]
        assert result["status"] == "answered", result
    for run_id in run_ids:
        stored = state.runs.load(run_id)
        assert stored.status == "finished" and stored.takeovers >= 1
        states = [e.state for e in state.approvals.executions(run_id=run_id)]
        assert states and set(states) <= {"done", "failed"}  # each statement ran once
    state.close()
