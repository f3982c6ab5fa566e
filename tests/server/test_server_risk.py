"""Risk over HTTP: a statement reading a sensitive column is high risk, needs two reviewers, and
the analyst sees both; the batch view and the audit log carry the estimate."""

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
[risk]
sensitive_columns = ["categories.name"]

[risk.quorum]
high = 2
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


def test_a_sensitive_read_needs_two_reviewers_and_the_analyst_sees_both(guarded: Running) -> None:
    with (
        guarded.client("alice") as alice,
        guarded.client("rita") as rita,
        guarded.client("ravi") as ravi,
    ):
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        [item] = batch["batch"]["items"]
        risk = item["risk"]
        assert risk["level"] == "high" and risk["sensitive_columns"] == ["categories.name"]
        assert risk["engine"] == "sqlite" and risk["estimate"]
        # SQLite's plan gives no row estimate, and the LIMIT (cap + 1) cannot rule a cut out
        assert risk["rows_expected"] is None and risk["row_cap_cuts"] is None
        assert batch["batch"]["quorum"] == 2
        [summary] = rita.get("/approvals", params={"run_id": run_id}).json()
        assert summary["risk"] == "high"
        opened = next(e for e in batch["audit"] if e["event"] == "batch_opened")
        assert opened["detail"]["risk"][item["call_id"]]["level"] == "high"

        decision = {"decisions": {item["call_id"]: "approve"}}
        first = rita.post(f"/approvals/{batch['batch_id']}/decision", json=decision).json()
        assert first["status"] == "pending"
        assert alice.get(f"/runs/{run_id}").json()["status"] == "awaiting_approval"
        second = ravi.post(f"/approvals/{batch['batch_id']}/decision", json=decision).json()
        assert second["status"] == "resolved"
        run = wait_for_run(alice, run_id, ("finished",))
    [approval] = run["results"][0]["approvals"]
    assert approval["approvers"] == ["rita", "ravi"] and approval["status"] == "approved"


def test_the_live_check_of_an_edit_shows_the_edits_risk(guarded: Running) -> None:
    with guarded.client("alice") as alice, guarded.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        [call_id] = batch["pending_ids"]
        url = f"/approvals/{batch['batch_id']}/items/{call_id}/validate"
        safe = rita.post(url, json={"sql": "SELECT COUNT(*) AS n FROM products"}).json()
        sensitive = rita.post(url, json={"sql": "SELECT name FROM categories"}).json()
        refused = rita.post(url, json={"sql": "DELETE FROM products"}).json()
    assert safe["ok"] and safe["risk"]["level"] != "high" and safe["risk"]["tables"] == ["products"]
    assert sensitive["ok"] and sensitive["risk"]["level"] == "high"
    assert sensitive["risk"]["sensitive_columns"] == ["categories.name"]
    assert not refused["ok"] and refused["risk"] is None
