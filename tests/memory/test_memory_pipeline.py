"""Memory inside real runs (cassettes recorded from the scripted server in tests/scripted_llm):
an approved pair is recorded and then retrieved, within the token budget, into the Batch-2
request of a paraphrased question; a rejected pair never appears as an example.

Re-record with ``pytest tests/memory/test_memory_pipeline.py --record-mode=rewrite``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from approvals import ApprovalBatch, ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import (
    MemorySettings,
    MemoryStore,
    ReviewMemory,
    approx_tokens,
    memory_for,
    scope_of,
)
from orchestrator.wiring import run_hooks
from safety import Policy
from tests.orchestrator.conftest import SCRIPTED_MODEL, Harness
from tests.scripted_llm.scenarios import Scenario, ScenarioScript, reasoning
from tests.scripted_llm.server import ScriptedLLMServer

SHIPPED = "How many orders were shipped in 2025?"
SHIPPED_SQL = (
    "SELECT COUNT(order_id) AS shipped_orders FROM orders WHERE status = 'shipped' "
    "AND order_date >= '2025-01-01' AND order_date < '2026-01-01'"
)
SHIPPED_AGAIN = "In 2024, how many orders got shipped?"
RETURNED = "How many orders were returned in 2025?"
RETURNED_SQL = "SELECT COUNT(order_id) AS returned_orders FROM orders WHERE status = 'returned'"
RETURNED_AGAIN = "Count the orders that were returned in 2024"


def _scenario(sql: str) -> Scenario:
    return Scenario(
        reasoning=reasoning(tables=["orders"], filters=[("orders", "status", "a status")]),
        sql=sql,
        answer=lambda p: f"{p['rows'][0][0]} orders." if p["rows"] else "No rows.",
    )


SCENARIOS = {
    SHIPPED: _scenario(SHIPPED_SQL),
    SHIPPED_AGAIN: _scenario(SHIPPED_SQL.replace("2025", "2024").replace("2026", "2025")),
    RETURNED: _scenario(RETURNED_SQL),
    RETURNED_AGAIN: _scenario(RETURNED_SQL + " AND order_date >= '2024-01-01'"),
}


@pytest.fixture
def harness() -> Iterator[Harness]:
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        base = os.environ.get("SQLGATE_RECORD_BASE_URL")
        yield Harness(
            (base, os.environ.get("SQLGATE_RECORD_MODEL", "gpt-4o-mini"))
            if base
            else (server.base_url, SCRIPTED_MODEL)
        )


def _sql_requests(cassette: Any, question: str) -> list[str]:
    """The user message of each Batch-2 request that carries ``question``."""
    found = []
    for request in cassette.requests:
        body = json.loads(request.body)
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if "You write SQL" in system and f"Question: {question}" in user:
            found.append(user)
    return found


def _approve_all(batch: ApprovalBatch) -> Mapping[str, Any]:
    """A reviewer who looked at every statement and approved it."""
    return {cid: {"action": "approve"} for cid in batch.pending_ids}


def _pipeline(harness: Harness, demo_url: str, state: StateDatabase, reviewer: Any) -> Pipeline:
    memory = ReviewMemory(MemoryStore(state.engine), MemorySettings(example_tokens=200))
    return Pipeline(TargetDatabase(demo_url), harness.llm(), reviewer, hooks=run_hooks(memory))


@pytest.mark.vcr
def test_an_approved_pair_reaches_the_sql_request_of_a_paraphrase(
    harness: Harness, demo_url: str, state: StateDatabase, vcr: Any
) -> None:
    pipeline = _pipeline(harness, demo_url, state, _approve_all)

    first = pipeline.ask(SHIPPED)
    assert first.status == "answered"
    stored = state.memory.examples()
    assert [(e.question, e.status, e.reviewers) for e in stored] == [
        (SHIPPED, "approved", ["reviewer"])
    ]
    assert _sql_requests(vcr, SHIPPED) and "Reviewed examples" not in _sql_requests(vcr, SHIPPED)[0]

    second = pipeline.ask(SHIPPED_AGAIN)

    assert second.status == "answered"
    (request,) = _sql_requests(vcr, SHIPPED_AGAIN)
    assert "Reviewed examples" in request
    section = request.split("Reviewed examples", 1)[1]
    assert f"-- {SHIPPED}\n{stored[0].sql}" in section  # the approved SQL, as it ran
    assert approx_tokens(f"{SHIPPED}\n{stored[0].sql}") <= 200
    assert len(vcr.requests) == 6  # retrieval cost no model call: 3 per question


def _reject_all(batch: ApprovalBatch) -> Mapping[str, Any]:
    return {
        cid: {"action": "reject", "reason": "returns are counted by return date"}
        for cid in batch.pending_ids
    }


@pytest.mark.vcr
def test_a_rejected_pair_never_appears_as_an_example(
    harness: Harness, demo_url: str, state: StateDatabase, vcr: Any
) -> None:
    pipeline = _pipeline(harness, demo_url, state, _reject_all)

    assert pipeline.ask(RETURNED).status == "rejected"
    (negative,) = state.memory.examples(kind="negative")
    assert negative.reason == "returns are counted by return date"

    pipeline.ask(RETURNED_AGAIN)

    (request,) = _sql_requests(vcr, RETURNED_AGAIN)
    assert "Reviewed examples" not in request
    assert negative.sql not in request


@pytest.mark.vcr
def test_business_notes_reach_the_reasoning_request_of_matching_questions(
    harness: Harness, demo_url: str, state: StateDatabase, vcr: Any
) -> None:
    note = state.memory.add_note(
        "Shipped means status 'shipped'; delivered ones do not count as shipped",
        author="alice",
    )
    pipeline = _pipeline(harness, demo_url, state, _approve_all)

    pipeline.ask(SHIPPED)
    pipeline.ask(RETURNED)

    reasoning = {}
    for request in vcr.requests:
        body = json.loads(request.body)
        if "reasoning stage" in body["messages"][0]["content"]:
            user = body["messages"][1]["content"]
            reasoning[user.split("Question: ", 1)[1].splitlines()[0]] = user
    assert (
        f"Business notes (definitions agreed by the people who own the data):\n- {note.text}"
        in reasoning[SHIPPED]
    )
    assert "Business notes" not in reasoning[RETURNED]


@pytest.mark.vcr
def test_statements_approved_unseen_by_yes_teach_nothing(
    harness: Harness, demo_url: str, state: StateDatabase
) -> None:
    pipeline = _pipeline(harness, demo_url, state, ApproveAll())  # what `--yes` uses

    assert pipeline.ask(SHIPPED).status == "answered"

    assert state.memory.examples() == []  # no person looked at it: no example, no evidence


EARNED = Policy.from_toml_text(
    "[auto_approval]\nenabled = true\nmin_approvals = 1\nmin_reviewers = 1\nmax_age_days = 30"
)


class Reviewer:
    """A person at the gate who approves (or rejects) and counts how often they were asked."""

    def __init__(self) -> None:
        self.asked = 0
        self.reject_with: str | None = None

    def __call__(self, batch: ApprovalBatch) -> Mapping[str, Any]:
        self.asked += 1
        if self.reject_with:
            return {c: {"action": "reject", "reason": self.reject_with} for c in batch.pending_ids}
        return {c: {"action": "approve"} for c in batch.pending_ids}


@pytest.mark.vcr
def test_a_reviewed_template_is_auto_approved_until_revoked_or_rejected(
    harness: Harness, demo_url: str, state: StateDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLGATE_MEMORY", "on")
    person = Reviewer()
    memory = memory_for(state, EARNED)  # what every entry point does, with the policy file
    assert memory is not None
    pipeline = Pipeline(TargetDatabase(demo_url), harness.llm(), person, hooks=run_hooks(memory))

    assert pipeline.ask(SHIPPED).approvals[0].status == "approved" and person.asked == 1
    (evidence,) = state.memory.examples()

    again = pipeline.ask(SHIPPED_AGAIN)  # same template, other literals: earned

    assert person.asked == 1 and again.status == "answered"
    (record,) = again.approvals
    assert record.status == "auto_approved"
    assert f"memory example {evidence.id} " in (record.reason or "")
    assert len(state.memory.examples()) == 1  # an auto-approval is no new evidence

    state.memory.revoke(evidence.template_id, actor="dana", reason="years differ")
    assert pipeline.ask(SHIPPED_AGAIN).approvals[0].status == "approved"  # reviewed again
    assert person.asked == 2
    assert pipeline.ask(SHIPPED_AGAIN).approvals[0].status == "auto_approved"  # earned again

    person.reject_with = "shipping counts by ship date"
    memory.record(  # a rejection of the template, e.g. from another run
        scope_of(pipeline),
        question=SHIPPED,
        sql=evidence.sql,
        status="rejected",
        reviewers=["erin"],
        reason="shipping counts by ship date",
    )
    assert pipeline.ask(SHIPPED_AGAIN).status == "rejected"  # never auto after a rejection
    assert person.asked == 3


@pytest.mark.vcr
def test_a_reviewed_questions_hint_is_kept_with_its_pair(
    harness: Harness, demo_url: str, state: StateDatabase, vcr: Any
) -> None:
    pipeline = _pipeline(harness, demo_url, state, _approve_all)
    hint = "shipped means status = 'shipped'"

    done = pipeline.ask(SHIPPED, hint=f" {hint} ")

    assert done.status == "answered"
    [example] = state.memory.examples()
    assert (example.question, example.hint) == (SHIPPED, hint)  # its words teach the vocabulary
