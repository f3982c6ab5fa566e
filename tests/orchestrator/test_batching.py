"""How questions are packed into calls: at most k, and never past the prompt budget."""

from __future__ import annotations

import time

from agents.llm_batch import QuestionInput, split_results
from agents.sql_generator import GeneratedSQL
from orchestrator.core.batching import BatchedCalls
from orchestrator.core.question import QuestionState


def _chunks(k: int, budget: int, contexts: list[str]) -> list[list[str]]:
    calls = BatchedCalls(
        None,  # type: ignore[arg-type]  # chunking never calls the model
        k=k,
        max_prompt_chars=budget,
        progress=lambda *a: None,
        next_index=lambda: 0,
    )
    qs = [
        QuestionState("run", f"q{i + 1}", "how many?", time.perf_counter)
        for i in range(len(contexts))
    ]
    prepared = {q.qid: QuestionInput(q.qid, q.text, c) for q, c in zip(qs, contexts, strict=False)}
    return [[q.qid for q in chunk] for chunk in calls._chunks(qs, prepared)]


def test_at_most_k_questions_per_call() -> None:
    assert _chunks(3, 10_000, ["x"] * 7) == [["q1", "q2", "q3"], ["q4", "q5", "q6"], ["q7"]]


def test_a_small_context_budget_means_fewer_questions_per_call() -> None:
    assert _chunks(10, 1_000, ["x" * 400] * 4) == [["q1", "q2"], ["q3", "q4"]]


def test_a_question_bigger_than_the_budget_still_goes_alone() -> None:
    assert _chunks(10, 1_000, ["x" * 5_000, "y"]) == [["q1"], ["q2"]]


def test_replies_are_matched_by_id_not_position() -> None:
    entries = [
        GeneratedSQL(question_id=q, sql="SELECT 1", explanation="")
        for q in ("q2", "q9", "q1", "q3", "q3")
    ]

    split = split_results(entries, ["q1", "q2", "q3", "q4"])

    assert sorted(split.by_id) == ["q1", "q2"]
    assert split.missing == ["q3", "q4"] and split.duplicated == ["q3"] and split.invented == ["q9"]
