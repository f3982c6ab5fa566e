"""The clarification loop over HTTP, the searchable history of runs, and the chart choice."""

from __future__ import annotations

import sqlalchemy as sa

from orchestrator.features.demo import AMBIGUOUS
from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_for_run

DONE = ("finished", "failed")


def _approve(client, run_id: str) -> None:
    batch = pending_batch(client, run_id)
    decisions = {cid: "approve" for cid in batch["pending_ids"]}
    response = client.post(
        f"/approvals/{batch['batch_id']}/decision",
        json={"decisions": decisions},
    )
    assert response.status_code == 200, response.text


def test_answers_start_a_linked_follow_up_that_is_answered(live: Running) -> None:
    alice, rita = live.client("alice"), live.client("rita")
    asked = alice.post("/runs", json={"question": AMBIGUOUS}).json()["run_id"]
    parent = wait_for_run(alice, asked, DONE)
    result = parent["results"][0]
    assert result["status"] == "needs_clarification"
    assert [q["id"] for q in result["clarification_questions"]] == ["metric", "entity"]
    assert result["llm_calls"] == 1

    # An id the model did not ask is refused in one sentence naming the ids asked.
    wrong = alice.post(f"/runs/{asked}/clarify", json={"answers": {"period": "2025"}})
    assert wrong.status_code == 422
    assert wrong.json()["error"]["code"] == "invalid_clarification"
    assert "'metric', 'entity'" in wrong.json()["error"]["message"]
    # Another analyst cannot answer alice's run; a reviewer may not ask at all.
    assert (
        live.client("bob")
        .post(f"/runs/{asked}/clarify", json={"answers": sc.AMBIGUOUS_ANSWERS})
        .status_code
        == 404
    )
    assert rita.post(f"/runs/{asked}/clarify", json={"answers": {}}).status_code == 403

    accepted = alice.post(f"/runs/{asked}/clarify", json={"answers": sc.AMBIGUOUS_ANSWERS})
    assert accepted.status_code == 202, accepted.text
    follow = accepted.json()
    assert follow["follow_up_of"] == asked
    assert " ".join(follow["questions"][0].split()) == sc.AMBIGUOUS_FOLLOW_UP

    _approve(rita, follow["run_id"])
    run = wait_for_run(alice, follow["run_id"], DONE)
    answer = run["results"][0]
    assert answer["status"] == "answered", answer
    assert answer["llm_calls"] == 3  # the budget of a normal question
    assert answer["follow_up_of"] == asked and run["follow_up_of"] == asked
    assert answer["columns"] == ["product", "revenue"] and answer["row_count"] == 5
    assert answer["chart"]["kind"] == "bar"

    # The link is kept on both sides, and in the run checkpoints' table.
    assert alice.get(f"/runs/{asked}").json()["follow_ups"] == [follow["run_id"]]
    engine = sa.create_engine(live.state_url)
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT follow_up_of FROM sqlgate_runs WHERE run_id = :r"),
            {"r": follow["run_id"]},
        ).scalar()
    engine.dispose()
    assert stored == asked

    # An answered run has nothing left to clarify.
    again = alice.post(f"/runs/{follow['run_id']}/clarify", json={"answers": {"metric": "x"}})
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_clarifiable"


def test_history_is_searchable_and_paged(live: Running) -> None:
    alice = live.client("alice")
    ids = []
    for question in (AMBIGUOUS, "Show me the best ones, please?", sc.MONTHLY_ORDERS):
        ids.append(alice.post("/runs", json={"question": question}).json()["run_id"])
    live.client("bob").post("/runs", json={"question": AMBIGUOUS})

    found = alice.get("/runs", params={"q": "BEST ONES"}).json()
    assert [r["run_id"] for r in found] == [ids[1], ids[0]]  # alice's only, newest first
    page = alice.get("/runs", params={"q": "best", "limit": 1, "offset": 1}).json()
    assert [r["run_id"] for r in page] == [ids[0]]
    assert alice.get("/runs", params={"q": "100%_"}).json() == []  # wildcards are literal
    assert [r["run_id"] for r in alice.get("/runs", params={"q": ids[2]}).json()] == [ids[2]]
    assert alice.get("/runs", params={"q": "x" * 201}).status_code == 422


def test_a_time_series_gets_a_line(live: Running) -> None:
    alice, rita = live.client("alice"), live.client("rita")
    run_id = alice.post("/runs", json={"question": sc.MONTHLY_ORDERS}).json()["run_id"]
    _approve(rita, run_id)
    result = wait_for_run(alice, run_id, DONE)["results"][0]
    assert result["status"] == "answered", result
    assert result["row_count"] == 12
    assert result["chart"] == {
        "kind": "line",
        "reason": "orders over month: a time series",
        "x": 0,
        "y": 1,
    }


def test_a_follow_up_plans_with_the_hint_its_question_was_asked_with(live: Running) -> None:
    from orchestrator.core.checkpoint import PausedCheckpoint
    from orchestrator.core.runs import RunStore

    hint = "best means the most revenue"
    alice = live.client("alice")
    asked = alice.post("/runs", json={"question": AMBIGUOUS, "hint": hint}).json()["run_id"]
    result = wait_for_run(alice, asked, DONE)["results"][0]
    assert result["status"] == "needs_clarification" and result["hint"] == hint

    accepted = alice.post(f"/runs/{asked}/clarify", json={"answers": sc.AMBIGUOUS_ANSWERS})
    assert accepted.status_code == 202, accepted.text
    follow = accepted.json()["run_id"]
    pending_batch(live.client("rita"), follow)  # planned: waiting at the gate
    runs = RunStore(live.state_url)
    checkpoint = runs.load(follow).checkpoint
    assert isinstance(checkpoint, PausedCheckpoint)
    assert checkpoint.questions[0].hint == hint
