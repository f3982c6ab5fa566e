"""Notifications from a real server: created, decided and finished reach a local receiver, signed;
a dead receiver never delays a decision; failures are listed for reviewers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.features.notify import NotificationSettings, RetryPolicy, verify
from orchestrator.interfaces.cli.main import app
from orchestrator.interfaces.server import create_app
from tests.notify.receivers import SilentReceiver, WebhookReceiver
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run, wait_until

SECRET = "whsec-server-test"


@pytest.fixture
def notified(
    demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer, request: pytest.FixtureRequest
) -> Iterator[tuple[Running, object]]:
    kind = getattr(request, "param", "ok")
    receiver: WebhookReceiver | SilentReceiver
    if kind == "silent":
        receiver = SilentReceiver()
    else:
        receiver = WebhookReceiver(statuses=[500] * 50 if kind == "failing" else [])
    settings = NotificationSettings(
        webhooks=(receiver.url,),
        secret=SECRET,
        base_url="https://sqlgate.example",
        retry=RetryPolicy(attempts=2, first=0.05),
    )
    app = create_app(make_config(demo_db, state_url, scripted_model, notifications=settings))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url), receiver
    finally:
        stop_server(server, thread)
        receiver.close()


def _events(receiver: WebhookReceiver, count: int) -> list[dict]:
    found = []
    for delivery in receiver.wait_for(count):
        assert verify(
            SECRET,
            delivery.headers["x-sqlgate-timestamp"],
            delivery.body,
            delivery.headers["x-sqlgate-signature"],
            now=time.time(),
        )
        found.append(json.loads(delivery.body))
    return found


def test_a_reviewers_day_is_announced_signed_and_without_rows(notified) -> None:
    live, receiver = notified
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        [created] = _events(receiver, 1)
        assert created["event"] == "batch_created" and created["statements"] == 1
        assert created["link"] == f"https://sqlgate.example/reviewer#batch={batch['batch_id']}"
        assert created["risk"] == batch["batch"]["items"][0]["risk"]["level"]
        decided = rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {batch["pending_ids"][0]: "approve"}},
        )
        assert decided.status_code == 200, decided.text
        wait_for_run(alice, run_id, ("finished",))
        events = _events(receiver, 3)
    assert [e["event"] for e in events] == ["batch_created", "batch_decided", "run_finished"]
    assert events[1]["decided_by"] == "rita"
    assert events[2]["statuses"] == ["answered"] and events[2]["run_id"] == run_id
    raw = b"".join(d.body for d in receiver.received)
    assert b"SELECT" not in raw and b"rows" not in raw  # a link, never data
    with live.client("rita") as rita:
        listed = rita.get("/notifications").json()
    assert listed["failed"] == 0 and {d["status"] for d in listed["deliveries"]} == {"delivered"}


@pytest.mark.parametrize("notified", ["silent"], indirect=True)
def test_a_dead_receiver_never_delays_a_decision(notified) -> None:
    live, _receiver = notified
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        time.sleep(0.3)  # the created notification is now hanging on the receiver
        started = time.monotonic()
        decided = rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {batch["pending_ids"][0]: "approve"}},
        )
        took = time.monotonic() - started
        assert decided.status_code == 200
        assert took < 2.0  # the webhook client waits 5 s per attempt on this receiver
        wait_for_run(alice, run_id, ("finished",), timeout=20)


@pytest.mark.parametrize("notified", ["failing"], indirect=True)
def test_failed_deliveries_are_listed_for_reviewers_not_analysts(
    notified, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, receiver = notified
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT]}).json()["run_id"]
        pending_batch(rita, run_id)
        listed = wait_until(
            lambda: (
                (r := rita.get("/notifications", params={"status": "failed"}).json())["failed"]
                and r
            ),
            what="a failed delivery",
        )
        assert alice.get("/notifications").status_code == 403
        assert rita.get("/notifications", params={"limit": 10_000}).status_code == 422
    [failed] = listed["deliveries"]
    assert failed["attempts"] == 2 and failed["last_error"] == "the receiver answered 500"
    assert failed["event"] == "batch_created" and receiver.url not in failed["channel"]
    assert len(receiver.received) == 2  # retried once after the first 500
    # and in the terminal: sqlgate runs notifications --failed
    monkeypatch.setenv("SQLGATE_STATE_URL", live.state_url)
    result = CliRunner().invoke(app, ["runs", "notifications", "--failed", "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["run_id"], row["status"], row["attempts"]) == (run_id, "failed", 2)
    assert SECRET not in result.stdout
