"""The seed design's scenarios end to end, replaying recorded model traffic.

Call budgets are asserted twice: from the run's own count and from the recorded interactions.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from agents import AGENT_NAMES
from approvals import ApprovalCancelled, ApproveAll, Edit, MappingReviewer, RejectAll
from orchestrator.core.result import RunStatus
from tests.orchestrator.conftest import Harness, interactions
from tests.scripted_llm import scenarios as sc

BATCH_1 = ["IntentAnalyzer", "ClarificationAgent", "QueryDecomposer", "QueryPlanner"]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _demo_rows(demo_db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(demo_db) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.vcr
def test_simple_question_costs_three_calls(
    harness: Harness, demo_url: str, demo_db: Path, vcr
) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.TOP_CATEGORIES)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 3 == interactions(vcr)
    assert result.agents_ran() == BATCH_1 + [
        "SchemaExplorer",
        "DataExplorer",
        "SQLGenerator",
        "SafetyValidator",
        "SQLExecutor",
        "ResultValidator",
        "ResponseSynthesizer",
    ]
    assert [t.batch for t in result.trace if t.batch] == [1, 1, 1, 1, 2, 4]
    assert [t.llm_call for t in result.trace if t.llm_call] == [1, 1, 1, 1, 2, 3]
    # The answer's numbers are the database's: recompute the top category independently.
    top = _demo_rows(
        demo_db,
        "SELECT c.name FROM order_items oi JOIN products p USING (product_id) JOIN categories c "
        "USING (category_id) JOIN orders o USING (order_id) WHERE o.order_date LIKE '2025-%' "
        "AND o.status <> 'cancelled' GROUP BY c.name "
        "ORDER BY SUM(oi.quantity * oi.unit_price * (1 - oi.discount)) DESC LIMIT 1",
    )[0][0]
    assert result.rows_preview[0][0] == top
    assert top in result.answer
    assert result.row_count == 5
    assert len(result.approvals) == 1 and result.approvals[0].status == "approved"
    assert result.tokens.total > 0


@pytest.mark.vcr
def test_meta_question_costs_two_calls(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.TABLES_META)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 2 == interactions(vcr)
    assert result.agents_ran() == BATCH_1 + ["SchemaExplorer", "ResponseSynthesizer"]
    assert result.sql is None and result.approvals == []
    for table in ("customers", "orders", "order_items", "products"):
        assert table in result.answer


@pytest.mark.vcr
def test_one_correction_costs_four_calls(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.ORDERS_BY_SEGMENT)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 4 == interactions(vcr)
    assert result.corrections == 1
    assert "SelfCorrection" in result.agents_ran()
    assert [t.batch for t in result.trace if t.batch] == [1, 1, 1, 1, 2, 3, 4]
    # The corrected SQL is new SQL: it went through its own approval cycle.
    assert [a.cycle for a in result.approvals] == [1, 2]
    assert len({a.call_id for a in result.approvals}) == 2
    assert sum(r[1] for r in result.rows_preview) > 0


@pytest.mark.vcr
def test_two_corrections_cost_five_calls(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.SALES_BY_REGION)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 5 == interactions(vcr)
    assert result.corrections == 2
    assert [t.agent for t in result.trace].count("SelfCorrection") == 2
    assert [a.cycle for a in result.approvals] == [1, 2, 3]


@pytest.mark.vcr
def test_unresolved_ambiguity_stops_after_one_call(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.AMBIGUOUS)

    assert result.status == RunStatus.NEEDS_CLARIFICATION
    assert result.llm_calls == 1 == interactions(vcr)
    assert result.agents_ran() == BATCH_1
    ids = [q.id for q in result.clarification_questions]
    assert len(ids) == 2 and len(set(ids)) == 2
    assert result.sql is None and result.answer is None


@pytest.mark.vcr
def test_all_twelve_agents_appear_across_scenarios(harness: Harness, demo_url: str) -> None:
    seen: set[str] = set()
    for question in (sc.TOP_CATEGORIES, sc.ORDERS_BY_SEGMENT):
        seen |= set(harness.pipeline(demo_url, ApproveAll()).ask(question).agents_ran())
    assert seen == set(AGENT_NAMES)


@pytest.mark.vcr
@pytest.mark.parametrize(
    "question", [sc.DELETE_CANCELLED, sc.DML_IN_CTE], ids=["delete", "dml-in-cte"]
)
def test_model_proposing_dml_is_refused_and_database_unchanged(
    harness: Harness, tmp_path: Path, demo_db: Path, question: str, vcr
) -> None:
    db = tmp_path / "copy.sqlite"
    db.write_bytes(demo_db.read_bytes())
    before = _file_digest(db)
    reviewer_calls: list[object] = []

    result = harness.pipeline(
        f"sqlite:///{db}", lambda batch: reviewer_calls.append(batch) or {}
    ).ask(question)

    assert result.status == RunStatus.UNSAFE
    assert result.llm_calls == 2 == interactions(vcr)
    assert result.error is not None and result.error.code
    assert "SQLExecutor" not in result.agents_ran()
    assert (
        reviewer_calls == []
    )  # a refused statement is shown as denied, never offered for approval
    assert [a.status for a in result.approvals] == ["denied"]
    assert _file_digest(db) == before
    assert (
        _demo_rows(db, "SELECT COUNT(*) FROM orders WHERE status IN ('cancelled', 'returned')")[0][
            0
        ]
        > 0
    )


@pytest.mark.vcr
def test_sixth_request_in_a_minute_is_refused(harness: Harness, demo_url: str, vcr) -> None:
    limiter = harness.limiter(limit=5, window=60.0)  # fail-fast, the seed's behaviour
    llm = harness.llm(limiter)
    first = harness.pipeline(demo_url, ApproveAll(), llm=llm).ask(sc.TOP_CATEGORIES)
    second = harness.pipeline(demo_url, ApproveAll(), llm=llm).ask(sc.ORDERS_BY_SEGMENT)

    assert first.status == RunStatus.ANSWERED
    assert second.status == RunStatus.RATE_LIMITED
    assert second.error.code == "rate_limited"
    assert 0 < second.error.retry_after <= 60.0
    assert second.llm_calls == 2 and second.http_requests == 2  # the third request never left
    assert interactions(vcr) == 5


@pytest.mark.vcr
def test_reviewer_rejection_runs_nothing_and_reaches_the_answer(
    harness: Harness, demo_url: str, vcr
) -> None:
    result = harness.pipeline(demo_url, RejectAll("revenue must exclude returns")).ask(
        sc.TOP_CATEGORIES
    )

    assert result.status == RunStatus.REJECTED
    assert "SQLExecutor" not in result.agents_ran()
    assert result.approvals[0].status == "rejected"
    assert result.approvals[0].reason == "revenue must exclude returns"
    assert "revenue must exclude returns" in result.answer
    assert result.llm_calls == 3 == interactions(vcr)


@pytest.mark.vcr
def test_edited_sql_is_what_runs(harness: Harness, demo_url: str, vcr) -> None:
    edited = (
        "SELECT c.name AS category, COUNT(*) AS products FROM categories AS c "
        "JOIN products AS p ON p.category_id = c.category_id GROUP BY c.name ORDER BY c.name LIMIT 3"
    )

    def reviewer(batch):
        return MappingReviewer({item.call_id: Edit(sql=edited) for item in batch.pending})(batch)

    result = harness.pipeline(demo_url, reviewer).ask(sc.PRODUCT_COUNT)

    assert result.status == RunStatus.ANSWERED
    assert result.approvals[0].status == "edited"
    assert result.sql == result.approvals[0].sql
    assert "LIMIT 3" in result.sql and result.row_count == 3
    assert interactions(vcr) == 3


@pytest.mark.vcr
def test_cancel_at_the_approval_prompt(harness: Harness, demo_url: str, vcr) -> None:
    def reviewer(batch):
        raise ApprovalCancelled("interrupted at the prompt")

    result = harness.pipeline(demo_url, reviewer).ask(sc.PRODUCT_COUNT)

    assert result.status == RunStatus.CANCELLED
    assert "SQLExecutor" not in result.agents_ran()
    assert result.llm_calls == 2 == interactions(vcr)


@pytest.mark.vcr
def test_invalid_json_twice_ends_with_a_model_error(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.GARBLED_TWICE)

    assert result.status == RunStatus.LLM_ERROR
    assert result.error.code == "invalid_model_output"
    assert result.llm_calls == 1 and result.http_requests == 2 == interactions(vcr)


@pytest.mark.vcr
def test_invalid_json_once_is_repaired(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.GARBLED_ONCE)

    assert result.status == RunStatus.ANSWERED
    assert result.llm_calls == 2 and result.http_requests == 3 == interactions(vcr)


@pytest.mark.vcr
def test_provider_429_is_retried_after_its_retry_after(
    harness: Harness, demo_url: str, vcr
) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.THROTTLED)

    assert result.status == RunStatus.ANSWERED
    assert result.llm_calls == 3 and result.http_requests == 4 == interactions(vcr)
    assert 2.5 in harness.clock.slept  # waited exactly what the provider asked


@pytest.mark.vcr
def test_provider_500_is_retried(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll()).ask(sc.FLAKY)

    assert result.status == RunStatus.ANSWERED
    assert result.http_requests == 4 == interactions(vcr)
    assert result.rows_preview == [[_demo_rows_count(demo_url, "employees")]]


def _demo_rows_count(url: str, table: str) -> int:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


@pytest.mark.vcr
def test_statement_timeout_ends_with_its_own_status(harness: Harness, demo_url: str, vcr) -> None:
    result = harness.pipeline(demo_url, ApproveAll(), statement_timeout_s=0.2).ask(sc.SLOW_QUERY)

    assert result.status == RunStatus.TIMED_OUT
    assert result.error.code == "statement_timeout"
    assert result.llm_calls == 3 == interactions(vcr)
    assert result.corrections == 0


@pytest.mark.parametrize("question", ["", "   ", "x" * 2001], ids=["empty", "blank", "oversized"])
def test_bad_questions_cost_no_call(question: str, demo_url: str) -> None:
    import httpx2

    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.llm import LLMClient, LLMSettings
    from orchestrator.core.pipeline import Pipeline
    from ratelimit import SlidingWindowLimiter

    llm = LLMClient(
        LLMSettings(base_url="http://127.0.0.1:9/v1"),
        limiter=SlidingWindowLimiter(),
        http_client=httpx2.Client(),
    )
    result = Pipeline(TargetDatabase(demo_url), llm, ApproveAll()).ask(question)

    assert result.status == RunStatus.INVALID_INPUT
    assert result.llm_calls == 0 and result.http_requests == 0
    assert result.exit_code == 2


@pytest.mark.vcr  # allows building the client; the test proves no request is made at all
def test_admission_control_refuses_up_front_when_the_worst_case_does_not_fit(
    harness: Harness, demo_url: str
) -> None:
    limiter = harness.limiter(limit=5, window=60.0)
    limiter.acquire()  # one request already spent in this window: a question may need five
    llm = harness.llm(limiter)
    from orchestrator.core.pipeline import PipelineConfig

    result = harness.pipeline(
        demo_url, ApproveAll(), llm=llm, config=PipelineConfig(admission=True)
    ).ask(sc.TOP_CATEGORIES)

    assert result.status == RunStatus.RATE_LIMITED
    assert result.llm_calls == 0 and result.http_requests == 0
    assert result.error.retry_after == pytest.approx(60.0)


@pytest.mark.vcr
def test_large_schema_prompts_carry_a_ranked_catalogue_and_only_the_planned_tables(
    harness: Harness, tmp_path_factory: pytest.TempPathFactory, vcr
) -> None:
    from tests.fixtures.erp_db import build_erp_database

    erp = build_erp_database(tmp_path_factory.mktemp("erp") / "erp.sqlite")
    result = harness.pipeline(f"sqlite:///{erp}", ApproveAll()).ask(sc.ERP_REVENUE)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 3
    batch_1 = (
        vcr.requests[0].body.decode()
        if hasattr(vcr.requests[0].body, "decode")
        else vcr.requests[0].body
    )
    batch_2 = (
        vcr.requests[1].body.decode()
        if hasattr(vcr.requests[1].body, "decode")
        else vcr.requests[1].body
    )
    assert "more tables, columns not shown" in batch_1  # pruned: 300 tables do not all go in full
    assert "ar_invoices(" in batch_1 and "crm_customers(" in batch_1
    assert len(batch_2) < len(batch_1)  # Batch 2 sees the planned tables and what they refer to
    explorer = next(t for t in result.trace if t.agent == "SchemaExplorer")
    assert "2 planned" in explorer.output_summary
    # The trace says what the planner was shown, and how long ranking took.
    planner = next(t for t in result.trace if t.agent == "QueryPlanner")
    assert "of 300 tables shown, " in planner.output_summary
    assert "ar_invoices" in planner.output_summary and "ranked in" in planner.output_summary
