"""The decision contract over HTTP: the exact pending set, approvals' error codes, idempotency, races."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from orchestrator.core.pipeline import PipelineConfig
from orchestrator.core.pipeline_config import MAX_QUESTION_CHARS
from orchestrator.interfaces.server import create_app
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run

EDITED = "SELECT c.name AS category, COUNT(*) AS products FROM categories AS c GROUP BY c.name"


def _paused(live: Running, *questions: str) -> tuple[str, dict]:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"questions": list(questions)}).json()["run_id"]
        wait_for_run(alice, run_id, ("awaiting_approval",))
        return run_id, pending_batch(rita, run_id)


def _decide(
    client: httpx.Client, batch_id: str, decisions: dict, key: str | None = None
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return client.post(
        f"/approvals/{batch_id}/decision", json={"decisions": decisions}, headers=headers
    )


def test_a_batch_shows_every_item_with_its_question_sql_and_findings(live: Running) -> None:
    run_id, batch = _paused(live, sc.PRODUCT_COUNT, sc.TOP_CATEGORIES)
    assert batch["status"] == "pending" and batch["batch"]["run_id"] == run_id
    items = batch["batch"]["items"]
    assert [i["question"] for i in items] == [sc.PRODUCT_COUNT, sc.TOP_CATEGORIES]
    assert all(i["sql"].startswith("SELECT") and "findings" in i for i in items)
    assert batch["pending_ids"] == [i["call_id"] for i in items]


def test_malformed_decisions_get_the_approvals_error_codes_and_change_nothing(
    live: Running,
) -> None:
    _, batch = _paused(live, sc.PRODUCT_COUNT, sc.TOP_CATEGORIES)
    first, second = batch["pending_ids"]
    cases = {
        "unknown_call_id": {first: "approve", second: "approve", "call_nope": "approve"},
        "missing_call_id": {first: "approve"},
        "invalid_decision": {first: "approve", second: {"action": "explode"}},
        "invalid_edit": {
            first: "approve",
            second: {"action": "edit", "sql": "DELETE FROM products"},
        },
    }
    with live.client("rita") as rita:
        for code, decisions in cases.items():
            response = _decide(rita, batch["batch_id"], decisions)
            assert response.status_code == 422, (code, response.text)
            error = response.json()["error"]
            assert code in [p["code"] for p in error["problems"]], (code, error)
        blank_reason = _decide(
            rita, batch["batch_id"], {first: {"action": "reject", "reason": " "}, second: "approve"}
        )
        assert (
            blank_reason.status_code == 422
            and blank_reason.json()["error"]["code"] == "invalid_decision"
        )
        for body in ({"decisions": ["approve"]}, {"decisions": "approve"}, {}, {"decision": {}}):
            response = rita.post(f"/approvals/{batch['batch_id']}/decision", json=body)
            assert (
                response.status_code == 422
                and response.json()["error"]["code"] == "invalid_request"
            )
        missing = _decide(rita, "batch_nope", {first: "approve"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "batch_not_found"
        assert rita.get(f"/approvals/{batch['batch_id']}").json()["status"] == "pending"


def test_a_body_with_a_repeated_key_or_not_an_object_is_refused_and_changes_nothing(
    live: Running,
) -> None:
    _, batch = _paused(live, sc.PRODUCT_COUNT, sc.TOP_CATEGORIES)
    first, second = batch["pending_ids"]
    url = f"/approvals/{batch['batch_id']}/decision"
    reject = '{"action": "reject", "reason": "no"}'
    twice = f'{{"decisions": {{"{first}": {reject}, "{second}": "approve", "{first}": "approve"}}}}'
    edit = '{"action": "edit", "sql": "SELECT 1", "sql": "SELECT 2"}'
    nested = f'{{"decisions": {{"{first}": {edit}, "{second}": "approve"}}}}'
    headers = {"Content-Type": "application/json"}
    with live.client("rita") as rita:
        for body in (twice, nested):
            response = rita.post(url, content=body, headers=headers)
            assert response.status_code == 422, response.text
            error = response.json()["error"]
            assert error["code"] == "duplicate_call_id", error
            assert first in " ".join(p["message"] for p in error["problems"]), error
        for body in ("null", "3", '["approve"]', '"approve"'):
            response = rita.post(url, content=body, headers=headers)
            assert response.status_code == 422, (body, response.text)
            assert response.json()["error"]["code"] == "invalid_decision_file", response.text
        after = rita.get(f"/approvals/{batch['batch_id']}").json()
        assert after["status"] == "pending" and after["pending_ids"] == [first, second]
        assert after["version"] == batch["version"] and after.get("outcome") is None


def test_an_idempotent_retry_returns_the_first_result_and_anything_else_conflicts(
    live: Running,
) -> None:
    run_id, batch = _paused(live, sc.PRODUCT_COUNT, sc.TOP_CATEGORIES)
    first, second = batch["pending_ids"]
    decisions = {first: {"action": "edit", "sql": EDITED}, second: "approve"}
    with live.client("rita") as rita, live.client("ravi") as ravi, live.client("alice") as alice:
        accepted = _decide(rita, batch["batch_id"], decisions, key="k-1")
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["resolutions"][first]["status"] == "edited"
        again = _decide(rita, batch["batch_id"], decisions, key="k-1")
        assert again.status_code == 200 and again.json() == accepted.json()
        reused = _decide(rita, batch["batch_id"], {first: "approve", second: "approve"}, key="k-1")
        assert (
            reused.status_code == 409 and reused.json()["error"]["code"] == "idempotency_conflict"
        )
        late = _decide(ravi, batch["batch_id"], decisions)
        assert late.status_code == 409
        assert late.json()["error"] | {"message": ""} == {
            "code": "decision_conflict",
            "message": "",
            "decided_by": "rita",
        }
        done = wait_for_run(alice, run_id, ("finished",))
    edited, approved = done["results"]
    assert edited["status"] == "answered" and edited["sql"].startswith(EDITED)
    assert (
        edited["approvals"][0]["status"] == "edited"
        and approved["approvals"][0]["status"] == "approved"
    )


def test_two_reviewers_racing_one_wins_the_other_gets_409(live: Running) -> None:
    run_id, batch = _paused(live, sc.PRODUCT_COUNT, sc.TOP_CATEGORIES)
    barrier = threading.Barrier(2)
    responses: dict[str, httpx.Response] = {}

    def decide(actor: str, decision: object) -> None:
        with live.client(actor) as client:
            barrier.wait()
            responses[actor] = _decide(
                client, batch["batch_id"], {cid: decision for cid in batch["pending_ids"]}
            )

    threads = [
        threading.Thread(target=decide, args=("rita", "approve")),
        threading.Thread(target=decide, args=("ravi", {"action": "reject", "reason": "not today"})),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(r.status_code for r in responses.values())
    assert statuses == [200, 409], {a: r.text for a, r in responses.items()}
    [winner] = [a for a, r in responses.items() if r.status_code == 200]
    [loser] = [r for r in responses.values() if r.status_code == 409]
    assert loser.json()["error"]["decided_by"] == winner
    with live.client("alice") as alice:
        done = wait_for_run(alice, run_id, ("finished",))
    expected = "answered" if winner == "rita" else "rejected"
    assert [r["status"] for r in done["results"]] == [expected, expected]


def test_a_run_reports_progress_then_its_answers(live: Running) -> None:
    run_id, batch = _paused(live, sc.PRODUCT_COUNT)
    with live.client("alice") as alice, live.client("rita") as rita:
        paused = alice.get(f"/runs/{run_id}").json()
        assert paused["batch_id"] == batch["batch_id"]
        assert paused["results"][0]["status"] == "awaiting_approval"
        assert (
            _decide(rita, batch["batch_id"], {batch["pending_ids"][0]: "approve"}).status_code
            == 200
        )
        done = wait_for_run(alice, run_id, ("finished",))
    [result] = done["results"]
    assert result["status"] == "answered" and result["row_count"] == 8
    assert result["columns"] == ["category", "products"] and len(result["rows_preview"]) == 8


def test_bad_questions_are_refused_before_anything_runs(live: Running) -> None:
    with live.client("alice") as alice:
        for body in (
            {},
            {"question": ""},
            {"questions": []},
            {"questions": ["ok", "  "]},
            {"question": "a", "questions": ["b"]},
            {"question": "x" * (MAX_QUESTION_CHARS + 1)},
            {"question": 7},
        ):
            response = alice.post("/runs", json=body)
            assert response.status_code == 422, body
            assert response.json()["error"]["code"] == "invalid_request"
        assert alice.get("/runs").json() == []


def test_a_question_over_the_pipelines_limit_is_refused_before_a_run_exists(
    demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer
) -> None:
    """The HTTP API reads the pipeline's own limit (``MAX_QUESTION_CHARS`` by default), so a
    question the pipeline would refuse is refused at the door, and no run is created for it."""
    for limit, code in ((MAX_QUESTION_CHARS, "invalid_request"), (50, "question_too_long")):
        config = make_config(
            demo_db, state_url, scripted_model, pipeline=PipelineConfig(max_question_chars=limit)
        )
        app = create_app(config)
        server, thread, base_url = start_server(app)
        try:
            with Running(base_url, app, state_url).client("alice") as alice:
                for body in (
                    {"question": "x" * (limit + 1)},
                    {"questions": ["ok", "y" * (limit + 1)]},
                ):
                    response = alice.post("/runs", json=body)
                    assert response.status_code == 422, body
                    assert response.json()["error"]["code"] == code
                assert alice.post("/runs", json={"question": "x" * limit}).status_code == 202
        finally:
            stop_server(server, thread)


def test_health_and_the_published_openapi(live: Running) -> None:
    with live.client() as client:
        assert client.get("/health").json() == {"status": "ok"}  # nothing more without a token
        spec = client.get("/openapi.json").json()
    with live.client("alice") as alice:
        assert alice.get("/health").json() == {"status": "ok", "dialect": "sqlite"}
    assert {
        "/runs",
        "/runs/{run_id}",
        "/approvals",
        "/approvals/{batch_id}",
        "/approvals/{batch_id}/decision",
        "/events",
        "/health",
    } <= set(spec["paths"])
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    decision = spec["paths"]["/approvals/{batch_id}/decision"]["post"]
    assert {"200", "401", "403", "404", "409", "422"} <= set(decision["responses"])
