"""Several server processes on one state database behave as one (SQLite file; PostgreSQL when set).

Each "process" is a separate app (its own stores, event hub and run pool) on its own port.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from orchestrator.interfaces.server import create_app
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import (
    finished,
    pending_batch,
    read_events,
    wait_for_run,
)


@pytest.fixture(params=["sqlite", "postgres"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.sqlite'}"
        return
    url = request.getfixturevalue("postgres_url")
    schema = f"server_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield (
            sa.make_url(url)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@pytest.fixture
def second(live: Running, demo_db: Path, scripted_model: ScriptedLLMServer) -> Iterator[Running]:
    app = create_app(make_config(demo_db, live.state_url, scripted_model))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, live.state_url)
    finally:
        stop_server(server, thread)


def test_a_run_asked_on_one_process_is_decided_on_another_and_every_stream_sees_it(
    live: Running, second: Running
) -> None:
    with (
        live.client("alice") as alice,
        second.client("rita") as rita_b,
        live.client("ravi") as ravi_a,
    ):
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        wait_for_run(alice, run_id, ("awaiting_approval",))
        with second.client("alice") as alice_b:  # the run is known everywhere
            assert alice_b.get(f"/runs/{run_id}").json()["status"] == "awaiting_approval"
        batch = pending_batch(rita_b, run_id)
        decided = rita_b.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in batch["pending_ids"]}},
        )
        assert decided.status_code == 200
        late = ravi_a.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {cid: "approve" for cid in batch["pending_ids"]}},
        )
        assert late.status_code == 409 and late.json()["error"]["decided_by"] == "rita"
        done = wait_for_run(alice, run_id, ("finished",))
        assert done["results"][0]["status"] == "answered" and done["results"][0]["row_count"] == 8
        for client in (rita_b, ravi_a):
            events = read_events(client, finished({run_id}), last_event_id="0-0")
            assert [e.data["decided_by"] for e in events if e.event == "approval_decided"] == [
                "rita"
            ]
            assert [e.event for e in events].count("run_finished") == 1
    from approvals import SqlApprovalStore

    executions = SqlApprovalStore(live.state_url).executions(run_id=run_id)
    assert [e.state for e in executions] == ["done"]  # resumed by exactly one process, run once
