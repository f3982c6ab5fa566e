"""Runs execute in the background: while a model call hangs, the server answers everything else."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.interfaces.server import create_app
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import read_events, wait_for_run, wait_until


class HeldScript:
    """The scenarios' replies, each held until the test lets it go."""

    def __init__(self) -> None:
        self.script = ScenarioScript(SCENARIOS)
        self.release = threading.Event()
        self.waiting = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Any:
        self.waiting.set()
        self.release.wait(timeout=60)
        return self.script(request)


@pytest.fixture
def held(
    allow_scripted_model: None, demo_db: Path, state_url: str
) -> Iterator[tuple[Running, HeldScript]]:
    script = HeldScript()
    with ScriptedLLMServer(script) as model:
        app = create_app(make_config(demo_db, state_url, model))
        server, thread, base_url = start_server(app)
        try:
            yield Running(base_url, app, state_url), script
        finally:
            script.release.set()
            stop_server(server, thread)


def test_the_server_answers_while_a_run_waits_on_the_model(
    held: tuple[Running, HeldScript],
) -> None:
    live, script = held
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        assert script.waiting.wait(timeout=30), "the model was never called"
        # the model call is in flight and held: everything else still answers
        assert alice.get("/health").json()["status"] == "ok"
        assert alice.get(f"/runs/{run_id}").json()["status"] == "running"
        second = alice.post("/runs", json={"question": sc.TOP_CATEGORIES})
        assert second.status_code == 202
        assert rita.get("/approvals").json() == []
        progress = read_events(
            rita, lambda got: any(e.data.get("stage") == "queued" for e in got), last_event_id="0-0"
        )
        assert progress[0].event == "run_progress"
        assert alice.get(f"/runs/{run_id}").json()["status"] == "running"
        script.release.set()
        wait_for_run(alice, run_id, ("awaiting_approval",))
        wait_until(lambda: rita.get("/approvals").json(), what="the batches")
