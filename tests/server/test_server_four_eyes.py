"""Four eyes over HTTP (the reviewer page uses the same route): an admin who asked a run may not
decide its batch, whatever the token may do; another reviewer may. SQLite and PostgreSQL state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.interfaces.server import create_app
from safety import Policy
from tests.memory.conftest import state_url  # noqa: F401 (SQLite and PostgreSQL state)
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run


@pytest.fixture
def four_eyes(
    demo_db: Path,
    state_url: str,  # noqa: F811
    scripted_model: ScriptedLLMServer,
) -> Iterator[Running]:
    policy = Policy.from_toml_text("[approvals]\nfour_eyes = true\n")
    app = create_app(make_config(demo_db, state_url, scripted_model, policy=policy))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)


def test_the_asker_cannot_decide_their_own_batch_over_http(four_eyes: Running) -> None:
    with four_eyes.client("root") as root, four_eyes.client("rita") as rita:
        run_id = root.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        assert batch["batch"]["authors"] == ["root"] and batch["batch"]["four_eyes"] is True
        [call_id] = batch["pending_ids"]
        decision = {"decisions": {call_id: "approve"}}
        url = f"/approvals/{batch['batch_id']}/decision"

        refused = root.post(url, json=decision)
        assert refused.status_code == 403
        error = refused.json()["error"]
        assert error["code"] == "author_may_not_decide" and "root" in error["message"]
        assert rita.get(f"/approvals/{batch['batch_id']}").json()["status"] == "pending"

        assert rita.post(url, json=decision).json()["status"] == "resolved"
        run = wait_for_run(root, run_id, ("finished",))
    [approval] = run["results"][0]["approvals"]
    assert approval["approvers"] == ["rita"]
