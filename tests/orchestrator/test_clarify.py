"""The analyst's answers to clarifying questions, and the follow-up question they make."""

from __future__ import annotations

import pytest

from agents import ReasoningAgent
from agents.llm_batch import QuestionInput
from orchestrator.core.result import ClarifyingQuestionOut
from orchestrator.features.clarify import (
    ANSWERS_HEADER,
    MAX_ANSWER_CHARS,
    ClarificationError,
    answered_context,
    follow_up_question,
    parse_answers,
)

ASKED = [
    ClarifyingQuestionOut(id="metric", text="Best by which measure?"),
    ClarifyingQuestionOut(id="entity", text="The best what?"),
]


def test_the_follow_up_carries_each_answer_in_the_order_asked() -> None:
    text = follow_up_question(
        "  Show me the best ones. ", ASKED, {"entity": " top\n products ", "metric": "revenue"}
    )
    assert text.splitlines() == [
        "Show me the best ones.",
        "",
        ANSWERS_HEADER,
        "- [metric] Best by which measure? Answer: revenue",
        "- [entity] The best what? Answer: top products",
    ]


def test_unanswered_questions_are_left_out_but_one_answer_is_needed() -> None:
    text = follow_up_question("Q?", ASKED, {"entity": "products", "metric": "   "})
    assert "[metric]" not in text and "[entity]" in text
    with pytest.raises(ClarificationError, match="at least one"):
        follow_up_question("Q?", ASKED, {"metric": " "})


def test_an_unknown_id_or_a_long_answer_is_refused_in_one_sentence() -> None:
    with pytest.raises(ClarificationError, match="'period'.*'metric', 'entity'"):
        follow_up_question("Q?", ASKED, {"period": "2025"})
    with pytest.raises(ClarificationError, match=f"the limit is {MAX_ANSWER_CHARS}"):
        follow_up_question("Q?", ASKED, {"metric": "x" * (MAX_ANSWER_CHARS + 1)})


def test_answers_are_parsed_from_id_equals_text() -> None:
    assert parse_answers(["metric=revenue", " entity = a=b "]) == {
        "metric": "revenue",
        "entity": "a=b",
    }
    for bad in (["revenue"], ["=revenue"], ["metric="]):
        with pytest.raises(ClarificationError, match="is not ID=TEXT"):
            parse_answers(bad)
    with pytest.raises(ClarificationError, match="twice"):
        parse_answers(["a=1", "a=2"])


def test_batch_1_is_told_only_about_a_follow_up() -> None:
    follow = follow_up_question("Q?", ASKED, {"metric": "revenue"})
    assert answered_context("How many orders?") == ""
    assert "take them as settled" in answered_context(follow)
    # In the prompt the follow-up is one question: the original and the answers on its line.
    prompt = ReasoningAgent().build_messages(
        [QuestionInput("q1", follow, answered_context(follow))], "orders: id", "sqlite"
    )[1]["content"]
    assert "### [q1] Question: Q? " + ANSWERS_HEADER + " - [metric]" in prompt
    assert "take them as settled" in prompt
