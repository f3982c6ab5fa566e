"""Many questions at once: batched calls matched by id, one approval cycle per round."""

from __future__ import annotations

import pytest

from approvals import ApproveAll
from orchestrator.core.pipeline import PipelineConfig
from orchestrator.core.result import RunStatus
from tests.orchestrator.conftest import Harness, interactions
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer


class CountingReviewer:
    """Approves everything and remembers each batch it was shown."""

    def __init__(self) -> None:
        self.batches = []

    def __call__(self, batch):
        self.batches.append(batch)
        return ApproveAll()(batch)


@pytest.mark.vcr
def test_twenty_questions_cost_three_calls_per_ten_and_one_approval(
    harness: Harness, demo_url: str, vcr
) -> None:
    reviewer = CountingReviewer()
    pipeline = harness.pipeline(demo_url, reviewer, config=PipelineConfig(k=10))
    calls_before = pipeline.llm.calls

    results = pipeline.run_batch(sc.COUNT_QUESTIONS)

    assert [r.status for r in results] == [RunStatus.ANSWERED] * 20
    assert pipeline.llm.calls - calls_before == 6 == interactions(vcr)  # 3 * ceil(20 / 10)
    assert len(reviewer.batches) == 1 and len(reviewer.batches[0].pending) == 20
    assert len({r.approvals[0].call_id for r in results}) == 20
    assert {r.approvals[0].batch_id for r in results} == {reviewer.batches[0].batch_id}


@pytest.mark.vcr
def test_batched_results_equal_each_question_alone(harness: Harness, demo_url: str, vcr) -> None:
    questions = sc.COUNT_QUESTIONS[:4] + sc.COUNT_QUESTIONS[-4:]
    together = harness.pipeline(demo_url, ApproveAll(), config=PipelineConfig(k=4)).run_batch(
        questions
    )
    alone = [harness.pipeline(demo_url, ApproveAll()).ask(q) for q in questions]

    for a, b in zip(together, alone, strict=False):
        assert (a.status, a.sql, a.rows_preview, a.answer) == (
            b.status,
            b.sql,
            b.rows_preview,
            b.answer,
        )
    assert interactions(vcr) == 3 * 2 + 3 * 8


@pytest.mark.vcr
def test_a_reply_that_drops_or_duplicates_a_question_is_recovered(demo_url: str, vcr) -> None:
    questions = sc.COUNT_QUESTIONS[:6]
    script = ScenarioScript(SCENARIOS, drop={questions[2]}, duplicate={questions[4]})
    with ScriptedLLMServer(script) as server:
        harness = Harness((server.base_url, "sqlgate-scripted"))
        pipeline = harness.pipeline(demo_url, ApproveAll())
        results = pipeline.run_batch(questions)

    assert [r.status for r in results] == [RunStatus.ANSWERED] * 6
    # each batched call (1, 2, 4) left two questions unanswered; each was retried alone
    assert interactions(vcr) == 3 * (1 + 2)
    assert results[2].llm_calls == 6 and results[0].llm_calls == 3


@pytest.mark.vcr
def test_one_failing_question_leaves_the_others_answered(
    harness: Harness, demo_url: str, vcr
) -> None:
    reviewer = CountingReviewer()
    questions = [sc.TOP_CATEGORIES, sc.DELETE_CANCELLED, sc.PRODUCT_COUNT, sc.AMBIGUOUS]

    results = harness.pipeline(demo_url, reviewer).run_batch(questions)

    assert [r.status for r in results] == [
        RunStatus.ANSWERED,
        RunStatus.UNSAFE,
        RunStatus.ANSWERED,
        RunStatus.NEEDS_CLARIFICATION,
    ]
    assert len(reviewer.batches) == 1
    batch = reviewer.batches[0]
    assert len(batch.pending) == 2 and len(batch.denied) == 1  # the DELETE is shown, not approvable
    assert interactions(vcr) == 3  # B1, B2, B4 for the whole batch


@pytest.mark.vcr
def test_corrections_are_batched_and_re_approved_once_per_round(
    harness: Harness, demo_url: str, vcr
) -> None:
    reviewer = CountingReviewer()
    questions = [sc.ORDERS_BY_SEGMENT, sc.SALES_BY_REGION, sc.PRODUCT_COUNT]

    results = harness.pipeline(demo_url, reviewer).run_batch(questions)

    assert [r.status for r in results] == [RunStatus.ANSWERED] * 3
    assert [r.corrections for r in results] == [1, 2, 0]
    # B1, B2, B3 (both questions), B3 (the one still failing), B4
    assert interactions(vcr) == 5
    # The failing statements name columns the schema does not have: the validator refuses them
    # before review, so each round's batch holds only what may run (one per round here).
    assert [len(b.pending) for b in reviewer.batches] == [1, 1, 1]
