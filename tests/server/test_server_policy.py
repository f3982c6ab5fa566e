"""The served policy: a token's role picks its ``[roles.<role>]`` section, and a reviewer's edit
is judged under the policy the batch was created under (the run's, a role's one included)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.interfaces.server import create_app
from safety import Policy
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run

POLICY = Policy.from_toml_text(
    """
[columns]
deny = ["products.cost"]

[roles.analyst]
tables.deny = ["employees"]
max_limit = 50
"""
)


@pytest.fixture
def guarded(demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer) -> Iterator[Running]:
    app = create_app(make_config(demo_db, state_url, scripted_model, policy=POLICY))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)


def _check(running: Running, batch: dict, sql: str) -> dict:
    with running.client("rita") as rita:
        response = rita.post(
            f"/approvals/{batch['batch_id']}/items/{batch['pending_ids'][0]}/validate",
            json={"sql": sql},
        )
        assert response.status_code == 200, response.text
        return response.json()


def test_roles_narrow_runs_and_edits_are_judged_under_the_batch_policy(guarded: Running) -> None:
    with guarded.client("alice") as alice, guarded.client("root") as root:
        analyst_run = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
        admin_run = root.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
        wait_for_run(alice, analyst_run, ("awaiting_approval",))
        wait_for_run(root, admin_run, ("awaiting_approval",))
    with guarded.client("rita") as rita:
        analyst_batch = pending_batch(rita, analyst_run)
        admin_batch = pending_batch(rita, admin_run)

    # The analyst's batch recorded the analyst's narrower policy; the admin's, the base one.
    assert analyst_batch["batch"]["context"]["policy_fingerprint"] == (
        POLICY.for_role("analyst").fingerprint()
    )
    assert admin_batch["batch"]["context"]["policy_fingerprint"] == POLICY.fingerprint()
    assert analyst_batch["batch"]["items"][0]["sql"].endswith("LIMIT 51")
    assert admin_batch["batch"]["items"][0]["sql"].endswith("LIMIT 1001")

    employees = "SELECT first_name FROM employees"
    assert _check(guarded, analyst_batch, employees)["ok"] is False
    assert _check(guarded, admin_batch, employees)["ok"] is True
    # Column rules hold for both, resolved against the real schema (star expanded without it).
    for batch in (analyst_batch, admin_batch):
        assert _check(guarded, batch, "SELECT name, cost FROM products")["ok"] is False
        starred = _check(guarded, batch, "SELECT * FROM products")
        assert starred["ok"] is True and "cost" not in starred["sql"]

    # The decision route uses the same validator: a refused edit leaves the batch pending.
    call_id = analyst_batch["pending_ids"][0]
    with guarded.client("rita") as rita:
        refused = rita.post(
            f"/approvals/{analyst_batch['batch_id']}/decision",
            json={"decisions": {call_id: {"action": "edit", "sql": employees}}},
        )
        assert refused.status_code in (400, 422), refused.text
        again = rita.get(f"/approvals/{analyst_batch['batch_id']}").json()
        assert again["status"] == "pending"
