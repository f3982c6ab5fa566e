"""The LLM agents are pure: messages from plain inputs, replies parsed into their models."""

from __future__ import annotations

import json

import pytest

from agents import (
    AgentOutputError,
    QuestionInput,
    ReasoningAgent,
    ResponseSynthesizer,
    SelfCorrection,
    SQLGenerator,
)
from agents.response_synthesizer import PREVIEW_CELL_CHARS, PREVIEW_ROWS, render_preview
from agents.sql_generator import render_plan

REASONING = {
    "question_id": "q1",
    "intent": {"intent": "DATA_QUERY", "confidence": 0.8, "rationale": "needs rows"},
    "clarification": {
        "resolved": True,
        "assumptions": ["2025 is the calendar year"],
        "questions": [],
    },
    "decomposition": {"complexity": "simple", "steps": ["count orders"]},
    "plan": {
        "tables": ["orders"],
        "filters": [{"table": "orders", "column": "status", "condition": "= 'shipped'"}],
        "needs_data_context": True,
    },
}


def test_reasoning_prompt_carries_the_schema_catalogue_and_every_question_by_id() -> None:
    items = [QuestionInput("q1", "How many orders?"), QuestionInput("q2", "Which tables exist?")]
    system, user = ReasoningAgent().build_messages(items, "orders(order_id INTEGER)", "postgres")

    assert "ReasoningOutput" in system["content"]  # the output schema is part of the prompt
    assert json.loads(system["content"].split("JSON schema:\n", 1)[1])["title"] == "ReasoningBatch"
    assert (
        "SQL dialect: postgres" in user["content"] and "orders(order_id INTEGER)" in user["content"]
    )
    assert "### [q1] Question: How many orders?" in user["content"]
    assert "### [q2] Question: Which tables exist?" in user["content"]


def test_every_output_field_is_described_in_the_schema() -> None:
    def undescribed(model_schema: dict) -> list[str]:
        return [
            name
            for name, prop in model_schema.get("properties", {}).items()
            if "description" not in prop
        ]

    for agent in (ReasoningAgent(), SQLGenerator(), SelfCorrection(), ResponseSynthesizer()):
        schema = agent.output_model.model_json_schema()
        models = [schema, *schema.get("$defs", {}).values()]
        assert [(m["title"], undescribed(m)) for m in models if undescribed(m)] == [], (
            agent.schema_name
        )


def test_parse_accepts_a_fenced_reply_and_refuses_a_wrong_one() -> None:
    reply = json.dumps({"results": [REASONING]})
    assert ReasoningAgent().parse(f"```json\n{reply}\n```").results[0].plan.tables == ["orders"]
    with pytest.raises(AgentOutputError, match="intent"):
        ReasoningAgent().parse(
            json.dumps({"results": [{**REASONING, "intent": {"intent": "MAYBE"}}]})
        )
    with pytest.raises(AgentOutputError, match="empty"):
        SQLGenerator().parse("  ")


def test_sql_and_correction_prompts_show_the_plan_the_schema_and_the_error() -> None:
    reasoning = ReasoningAgent().parse(json.dumps({"results": [REASONING]})).results[0]
    plan = render_plan(reasoning)
    assert "filter: orders.status = 'shipped'" in plan and "assumption: 2025" in plan

    _, user = SQLGenerator().build_messages(
        [QuestionInput("q1", "How many shipped orders?", SQLGenerator.question_context(reasoning))],
        "CREATE TABLE orders (...)",
        "orders.status: shipped, delivered",
        "sqlite",
    )
    assert "Sample values of filtered columns" in user["content"] and "Plan:" in user["content"]

    context = SelfCorrection.question_context("SELECT x FROM orders", "no such column: x", 2)
    _, user = SelfCorrection().build_messages(
        [QuestionInput("q1", "q", context)], "CREATE TABLE orders", "sqlite"
    )
    assert "(attempt 2)" in user["content"] and "no such column: x" in user["content"]


def test_the_answer_sees_a_bounded_preview_only() -> None:
    rows = [[i, "y" * 500] for i in range(100)]
    preview = render_preview(["n", "text"], rows, 100)

    shown = json.loads(preview.split("\n")[0])
    assert len(shown["rows"]) == PREVIEW_ROWS
    assert all(len(r[1]) == PREVIEW_CELL_CHARS for r in shown["rows"])
    assert preview.endswith(f"({100 - PREVIEW_ROWS} more rows not shown)")
