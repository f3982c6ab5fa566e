"""What the pages read: a batch with who asked, pretty SQL, votes and its audit trail; the live check
of an edit (the same verdict the decision gives); runs with who decided; paged listings."""

from __future__ import annotations

import httpx

from tests.scripted_llm import scenarios as sc
from tests.server.conftest import Running
from tests.server.server_helpers import pending_batch, wait_for_run, wait_until

EDITED = "SELECT c.name AS category, COUNT(*) AS products FROM categories AS c GROUP BY c.name"


def _paused(live: Running, *questions: str) -> tuple[str, dict]:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": list(questions)}).json()["run_id"]
        wait_for_run(alice, run_id, ("awaiting_approval",))
        return run_id, pending_batch(rita, run_id)


def _check(client: httpx.Client, batch: dict, call_id: str, sql: str) -> httpx.Response:
    return client.post(
        f"/approvals/{batch['batch_id']}/items/{call_id}/validate", json={"sql": sql}
    )


def test_a_batch_tells_who_asked_when_with_pretty_sql_and_its_audit(live: Running) -> None:
    run_id, batch = _paused(live, sc.PRODUCT_COUNT)
    assert batch["asked_by"] == "alice" and batch["asked_at"]
    item = batch["batch"]["items"][0]
    assert "\n" in item["sql_pretty"] and item["sql_pretty"].split()[0].upper() == "SELECT"
    assert " ".join(item["sql_pretty"].split()) == " ".join(item["sql"].split()) or (
        item["sql_pretty"] != item["sql"]
    )
    assert batch["votes"] == [] and batch["batch"]["quorum"] == 1
    assert [(e["event"], e["actor"]) for e in batch["audit"]][0][0] == "batch_opened"
    with live.client("rita") as rita:
        rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {item["call_id"]: "approve"}},
        ).raise_for_status()
        decided = rita.get(f"/approvals/{batch['batch_id']}").json()
    trail = [(e["event"], e["actor"]) for e in decided["audit"]]
    assert ("item_resolved", "rita") in trail and ("batch_resolved", "rita") in trail
    assert decided["outcome"]["decided_by"] == "rita"


def test_an_edit_is_checked_live_with_the_verdict_the_decision_gives(live: Running) -> None:
    _, batch = _paused(live, sc.PRODUCT_COUNT)
    call_id = batch["pending_ids"][0]
    model_sql = batch["batch"]["items"][0]["sql"]
    with live.client("rita") as rita:
        refused = _check(rita, batch, call_id, "DELETE FROM products")
        assert refused.status_code == 200
        verdict = refused.json()
        assert verdict["ok"] is False and verdict["sql"] is None and verdict["refusal"]
        accepted = _check(rita, batch, call_id, EDITED).json()
        assert accepted["ok"] is True and accepted["refusal"] is None
        assert accepted["sql"].startswith("SELECT") and "\n" in accepted["sql_pretty"]
        ops = {line["op"] for line in accepted["diff"]}
        assert {"-", "+"} <= ops, accepted["diff"]
        same = _check(rita, batch, call_id, model_sql).json()
        assert same["ok"] and {line["op"] for line in same["diff"]} == {" "}
        # nothing was decided by checking
        assert rita.get(f"/approvals/{batch['batch_id']}").json()["status"] == "pending"
        # the decision refuses what the check refused, with the same words ...
        decision = rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {call_id: {"action": "edit", "sql": "DELETE FROM products"}}},
        )
        assert decision.status_code == 422
        assert verdict["refusal"] in decision.json()["error"]["problems"][0]["message"]
        # ... and runs exactly what the check said would run
        decision = rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {call_id: {"action": "edit", "sql": EDITED}}},
        )
        assert decision.status_code == 200
        assert decision.json()["resolutions"][call_id]["sql"] == accepted["sql"]


def test_the_edit_check_is_for_reviewers_and_real_items(live: Running) -> None:
    _, batch = _paused(live, sc.PRODUCT_COUNT)
    call_id = batch["pending_ids"][0]
    with live.client("alice") as alice, live.client("rita") as rita, live.client() as nobody:
        assert _check(alice, batch, call_id, EDITED).status_code == 403
        assert _check(nobody, batch, call_id, EDITED).status_code == 401
        missing = _check(rita, batch, "call_nope", EDITED)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "call_not_found"
        gone = rita.post("/approvals/batch_nope/items/x/validate", json={"sql": EDITED})
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "batch_not_found"
        bad = rita.post(f"/approvals/{batch['batch_id']}/items/{call_id}/validate", json={"sql": 7})
        assert bad.status_code == 422


def test_a_finished_run_says_who_approved_and_who_edited(live: Running) -> None:
    run_id, batch = _paused(live, sc.PRODUCT_COUNT, sc.TOP_CATEGORIES)
    first, second = batch["pending_ids"]
    with live.client("rita") as rita, live.client("alice") as alice:
        rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {first: {"action": "edit", "sql": EDITED}, second: "approve"}},
        ).raise_for_status()
        run = wait_for_run(alice, run_id, ("finished",))
        listed = alice.get("/runs").json()[0]
    for view in (run, listed):
        approvals = [r["approvals"][-1] for r in view["results"]]
        assert [(a["status"], a["decided_by"]) for a in approvals] == [
            ("edited", "rita"),
            ("approved", "rita"),
        ]
        assert approvals[0]["edited_from"] == batch["batch"]["items"][0]["sql"]
        assert approvals[1]["edited_from"] is None and approvals[0]["decided_at"]


def test_runs_and_batches_come_a_page_at_a_time(live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        asked = [
            alice.post("/runs", json={"question": question}).json()["run_id"]
            for question in [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES] * 2 + [sc.PRODUCT_COUNT]
        ]
        newest_first = asked[::-1]
        pages = [
            [r["run_id"] for r in alice.get("/runs", params={"limit": 2, "offset": o}).json()]
            for o in (0, 2, 4)
        ]
        assert pages == [newest_first[0:2], newest_first[2:4], newest_first[4:]]
        assert alice.get("/runs", params={"offset": 5}).json() == []
        for run_id in asked:
            pending_batch(rita, run_id)
        oldest = [b["run_id"] for b in rita.get("/approvals", params={"limit": 10}).json()]
        newest = [
            b["run_id"]
            for b in rita.get(
                "/approvals", params={"order": "newest", "limit": 2, "offset": 1}
            ).json()
        ]
    assert sorted(oldest) == sorted(asked)  # in the order the runs reached the gate
    assert newest == oldest[::-1][1:3]


def test_a_correction_cycle_shows_what_failed_and_what_changed(live: Running) -> None:
    # Both mistakes of this question are refused by the validator before review (an ambiguous
    # column, then a misspelt one); the batch a reviewer decides is the second correction's.
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.SALES_BY_REGION}).json()["run_id"]
        decided = wait_until(
            lambda: next(
                (
                    record
                    for s in rita.get("/approvals", params={"run_id": run_id}).json()
                    if (record := rita.get(f"/approvals/{s['batch_id']}").json())["pending_ids"]
                ),
                None,
            ),
            what="the batch with a statement to decide",
        )
    [(call_id, correction)] = decided["corrections"].items()
    assert call_id == decided["pending_ids"][0]
    assert correction["previous_cycle"] == decided["batch"]["cycle"] - 1
    assert "region_name" in correction["error"]
    removed = [line["text"] for line in correction["diff"] if line["op"] == "-"]
    added = [line["text"] for line in correction["diff"] if line["op"] == "+"]
    assert any("r.region_name" in t for t in removed), removed
    assert any("r.name AS region" in t for t in added), added
