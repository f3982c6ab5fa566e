"""/events: typed events with increasing ids; Last-Event-ID resumes exactly once, in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.server import Cursor, create_app
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import Sse, finished, pending_batch, read_events, wait_for_run


def _approve_all(client, batch: dict) -> None:
    response = client.post(f"/approvals/{batch['batch_id']}/decision",
                           json={"decisions": {cid: "approve" for cid in batch["pending_ids"]}})
    assert response.status_code == 200, response.text


def _increasing(events: list[Sse]) -> None:
    cursors = [Cursor.parse(e.id or "") for e in events]
    for before, after in zip(cursors, cursors[1:], strict=False):
        assert after.audit >= before.audit and after.run >= before.run and after != before, (before, after)


def test_cursor_ids_parse_and_refuse_garbage() -> None:
    assert str(Cursor.parse("12-7")) == "12-7" and Cursor.parse(" 0-0 ") == Cursor(0, 0)
    for text in ("", "12", "a-b", "1-2-3", "-1-2"):
        with pytest.raises(ValueError):
            Cursor.parse(text)


def test_a_malformed_last_event_id_is_a_400(live: Running) -> None:
    with live.client("rita") as rita:
        response = rita.get("/events", headers={"Last-Event-ID": "yesterday"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_last_event_id"


def test_every_event_carries_the_batch_and_its_call_ids(live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES]}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        _approve_all(rita, batch)
        events = read_events(rita, finished({run_id}), last_event_id="0-0")
    kinds = [e.event for e in events]
    assert kinds[0] == "run_progress" and kinds[-1] == "run_finished"
    assert {"approval_requested", "approval_decided", "run_progress", "run_finished"} <= set(kinds)
    assert all(e.data["type"] == e.event and e.data["id"] == e.id for e in events)
    assert all(e.data["run_id"] == run_id for e in events)
    _increasing(events)
    calls = set(batch["pending_ids"])
    by_kind = {e.event: e for e in events}
    for kind in ("approval_requested", "approval_decided", "run_finished"):
        assert by_kind[kind].data["batch_id"] == batch["batch_id"]
        assert {i["call_id"] for i in by_kind[kind].data["items"]} == calls, kind
    requested = by_kind["approval_requested"].data["items"]
    assert [i["question"] for i in requested] == [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES]
    assert {i["status"] for i in by_kind["approval_decided"].data["items"]} == {"approved"}
    assert by_kind["approval_decided"].data["decided_by"] == "rita"
    waiting = [e for e in events if e.event == "run_progress" and e.data["stage"] == "awaiting_approval"]
    assert waiting and {i["call_id"] for i in waiting[0].data["items"]} == calls


def test_reconnecting_with_last_event_id_gets_every_event_exactly_once_in_order(live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        first = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        # connected from the start; drop the connection as soon as the first batch is requested
        before = read_events(rita, lambda got: any(e.event == "approval_requested" for e in got), last_event_id="0-0")
        # while nobody listens: a decision, a second run, its batch, its decision, two finishes
        _approve_all(rita, pending_batch(rita, first))
        second = alice.post("/runs", json={"question": sc.TOP_CATEGORIES}).json()["run_id"]
        _approve_all(rita, pending_batch(rita, second))
        wait_for_run(alice, first, ("finished",))
        wait_for_run(alice, second, ("finished",))
        after = read_events(rita, finished({first, second}), last_event_id=before[-1].id)
        # reconnect again from the middle of the second part: still exactly once
        middle = len(after) // 2
        tail = read_events(rita, lambda got: len(got) >= len(after) - middle, last_event_id=after[middle - 1].id)
        everything = read_events(rita, finished({first, second}), last_event_id="0-0")

    resumed = before + after
    origins = [e.data["origin"] for e in resumed]
    assert len(origins) == len(set(origins)), "an event was delivered twice"
    assert sorted(origins) == sorted(e.data["origin"] for e in everything), "an event was lost"
    for source in ("audit", "run"):  # each source in its order
        seqs = [int(o.split(":")[1]) for o in origins if o.startswith(source)]
        assert seqs == sorted(seqs) and seqs == [int(o.split(":")[1]) for o in
                                                 (e.data["origin"] for e in everything) if o.startswith(source)]
    _increasing(resumed)
    assert [e.data["origin"] for e in tail] == [e.data["origin"] for e in after[middle:]]
    assert [e.id for e in tail] == [e.id for e in after[middle:]]


def test_an_analyst_sees_only_the_events_of_their_own_runs(live: Running) -> None:
    with live.client("alice") as alice, live.client("bob") as bob, live.client("rita") as rita:
        mine = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        theirs = bob.post("/runs", json={"question": sc.TOP_CATEGORIES}).json()["run_id"]
        for run_id in (mine, theirs):
            _approve_all(rita, pending_batch(rita, run_id))
        wait_for_run(bob, theirs, ("finished",))
        seen = read_events(alice, finished({mine}), last_event_id="0-0")
        everything = read_events(rita, finished({mine, theirs}), last_event_id="0-0")
    assert {e.data["run_id"] for e in seen} == {mine}
    assert {e.data["run_id"] for e in everything} == {mine, theirs}


def test_two_server_processes_on_one_state_database_behave_as_one(
    live: Running, demo_db: Path, scripted_model: ScriptedLLMServer
) -> None:
    """A run asked on A is decided on B; A's run resumes, and both streams see the decision."""
    other = create_app(make_config(demo_db, live.state_url, scripted_model))
    server, thread, base_url = start_server(other)
    try:
        b = Running(base_url, other, live.state_url)
        with live.client("alice") as alice, b.client("rita") as rita_b, live.client("ravi") as ravi_a:
            run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
            wait_for_run(alice, run_id, ("awaiting_approval",))
            assert rita_b.get(f"/runs/{run_id}").status_code == 403  # B knows the run; rita may not read it
            batch = pending_batch(rita_b, run_id)
            _approve_all(rita_b, batch)
            done = wait_for_run(alice, run_id, ("finished",))
            assert done["results"][0]["status"] == "answered"
            for client in (rita_b, ravi_a):
                events = read_events(client, finished({run_id}), last_event_id="0-0")
                assert [e.data["decided_by"] for e in events if e.event == "approval_decided"] == ["rita"]
                assert [e.event for e in events].count("run_finished") == 1
    finally:
        stop_server(server, thread)
