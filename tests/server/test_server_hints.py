"""``POST /runs`` takes a hint per question: recorded with the run, which plans with it."""

from __future__ import annotations

import json

from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running
from tests.server.server_helpers import wait_for_run

HINT = "products are the rows of the products table"


def _prompts(model: ScriptedLLMServer) -> list[str]:
    return [" ".join(m["content"] for m in r["messages"]) for r in model.requests]


def test_a_questions_hint_reaches_its_plan(
    live: Running, scripted_model: ScriptedLLMServer
) -> None:
    with live.client("alice") as alice:
        response = alice.post("/runs", json={"question": sc.PRODUCT_COUNT, "hint": HINT})
        assert response.status_code == 202, response.text
        wait_for_run(alice, response.json()["run_id"], ("awaiting_approval",))
    assert f"Hint from the asker: {HINT}" in _prompts(scripted_model)[0]


def test_hints_go_one_per_question(live: Running, scripted_model: ScriptedLLMServer) -> None:
    questions = [sc.PRODUCT_COUNT, sc.COUNT_QUESTIONS[0]]
    with live.client("alice") as alice:
        response = alice.post("/runs", json={"questions": questions, "hints": [HINT, ""]})
        assert response.status_code == 202, response.text
        wait_for_run(alice, response.json()["run_id"], ("awaiting_approval",))
        first = _prompts(scripted_model)[0]
        assert first.count("Hint from the asker:") == 1 and HINT in first

        for body in (
            {"questions": questions, "hints": [HINT]},  # not one each
            {"questions": questions, "hint": HINT},  # hint goes with question
            {"question": sc.PRODUCT_COUNT, "hints": [HINT]},
            {"question": sc.PRODUCT_COUNT, "hint": "x" * 100_000},
        ):
            refused = alice.post("/runs", json=body)
            assert refused.status_code == 422, json.dumps(body)[:80]
