"""/events: typed events with increasing ids; Last-Event-ID resumes exactly once, in order."""

from __future__ import annotations

import itertools

import pytest

from orchestrator.interfaces.server import Cursor
from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import (
    Sse,
    finished,
    pending_batch,
    read_events,
    wait_for_run,
)


def _approve_all(client, batch: dict) -> None:
    response = client.post(
        f"/approvals/{batch['batch_id']}/decision",
        json={"decisions": {cid: "approve" for cid in batch["pending_ids"]}},
    )
    assert response.status_code == 200, response.text


def _increasing(events: list[Sse]) -> None:
    cursors = [Cursor.parse(e.id or "") for e in events]
    for before, after in itertools.pairwise(cursors):
        assert after.audit >= before.audit and after.run >= before.run and after != before, (
            before,
            after,
        )


def test_cursor_ids_parse_and_refuse_garbage() -> None:
    assert str(Cursor.parse("12-7")) == "12-7" and Cursor.parse(" 0-0 ") == Cursor(0, 0)
    for text in ("", "12", "a-b", "1-2-3", "-1-2"):
        with pytest.raises(ValueError):
            Cursor.parse(text)


def test_a_malformed_last_event_id_is_a_400(live: Running) -> None:
    with live.client("rita") as rita:
        response = rita.get("/events", headers={"Last-Event-ID": "yesterday"})
    assert (
        response.status_code == 400 and response.json()["error"]["code"] == "invalid_last_event_id"
    )


def test_every_event_carries_the_batch_and_its_call_ids(live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post(
            "/runs", json={"questions": [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES]}
        ).json()["run_id"]
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
    waiting = [
        e for e in events if e.event == "run_progress" and e.data["stage"] == "awaiting_approval"
    ]
    assert waiting and {i["call_id"] for i in waiting[0].data["items"]} == calls


def test_reconnecting_with_last_event_id_gets_every_event_exactly_once_in_order(
    live: Running,
) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        first = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        # connected from the start; drop the connection as soon as the first batch is requested
        before = read_events(
            rita, lambda got: any(e.event == "approval_requested" for e in got), last_event_id="0-0"
        )
        # while nobody listens: a decision, a second run, its batch, its decision, two finishes
        _approve_all(rita, pending_batch(rita, first))
        second = alice.post("/runs", json={"question": sc.TOP_CATEGORIES}).json()["run_id"]
        _approve_all(rita, pending_batch(rita, second))
        wait_for_run(alice, first, ("finished",))
        wait_for_run(alice, second, ("finished",))
        after = read_events(rita, finished({first, second}), last_event_id=before[-1].id)
        # reconnect again from the middle of the second part: still exactly once
        middle = len(after) // 2
        tail = read_events(
            rita, lambda got: len(got) >= len(after) - middle, last_event_id=after[middle - 1].id
        )
        everything = read_events(rita, finished({first, second}), last_event_id="0-0")

    resumed = before + after
    origins = [e.data["origin"] for e in resumed]
    assert len(origins) == len(set(origins)), "an event was delivered twice"
    assert sorted(origins) == sorted(e.data["origin"] for e in everything), "an event was lost"
    for source in ("audit", "run"):  # each source in its order
        seqs = [int(o.split(":")[1]) for o in origins if o.startswith(source)]
        assert seqs == sorted(seqs) and seqs == [
            int(o.split(":")[1])
            for o in (e.data["origin"] for e in everything)
            if o.startswith(source)
        ]
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


def test_a_batch_past_its_deadline_is_expired_by_the_server_and_announced(live: Running) -> None:
    from datetime import timedelta

    from approvals import ApprovalGate, ApprovalItem, SqlApprovalStore

    class Accepted:
        ok, findings, refusal = True, [], None

        def __init__(self, sql: str) -> None:
            self.sql = sql

    gate = ApprovalGate(
        reviewer=None,
        validate=Accepted,
        store=SqlApprovalStore(live.state_url),
        run_id="run_elsewhere",
        ttl=timedelta(milliseconds=300),
    )
    batch = gate.open(
        [
            ApprovalItem.new(
                question_id="q1", question="How many regions?", sql="SELECT COUNT(*) FROM regions"
            )
        ]
    )
    with live.client("rita") as rita:
        events = read_events(
            rita, lambda got: any(e.event == "approval_expired" for e in got), last_event_id="0-0"
        )
        late = rita.post(
            f"/approvals/{batch.batch_id}/decision",
            json={"decisions": {batch.pending_ids[0]: "approve"}},
        )
    requested, expired = events[-2:]
    assert (requested.event, expired.event) == ("approval_requested", "approval_expired")
    assert expired.data["batch_id"] == batch.batch_id and expired.data["action"] == "reject"
    assert [(i["call_id"], i["status"]) for i in expired.data["items"]] == [
        (batch.pending_ids[0], "rejected")
    ]
    assert late.status_code == 409 and late.json()["error"]["code"] == "batch_expired"


def test_item_resolutions_wait_for_their_batch_event() -> None:
    """Audit entries of one decision are read whole: trailing item entries are left for the next read."""
    from datetime import UTC, datetime

    from approvals import AuditEvent
    from orchestrator.interfaces.server.events import approval_events

    at = datetime.now(UTC)
    entries = [
        AuditEvent(
            seq=1,
            at=at,
            run_id="r",
            batch_id="b",
            event="batch_opened",
            actor="sqlgate",
            detail={"pending": ["c1"], "cycle": 1},
        ),
        AuditEvent(
            seq=2,
            at=at,
            run_id="r",
            batch_id="b",
            call_id="c1",
            event="item_resolved",
            actor="rita",
            detail={"status": "approved"},
        ),
    ]
    events, consumed = approval_events(entries)
    assert [e.type for e in events] == ["approval_requested"] and consumed == 1
    entries.append(
        AuditEvent(seq=3, at=at, run_id="r", batch_id="b", event="batch_resolved", actor="rita")
    )
    events, consumed = approval_events(entries[1:])
    assert [e.type for e in events] == ["approval_decided"] and consumed == 3
    assert events[0].data["items"] == [
        {"call_id": "c1", "status": "approved", "reason": None, "sql_hash": None}
    ]
