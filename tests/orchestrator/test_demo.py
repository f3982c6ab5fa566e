"""``sqlgate demo``: its cassette is recorded here, and replayed offline by the product itself."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from approvals import ApproveAll, TerminalReviewer
from orchestrator.core.result import RunStatus
from orchestrator.features.demo import DEMO_QUESTIONS, TOP_CATEGORIES, DemoSession, demo_cassette
from orchestrator.interfaces.cli.common import check_edits_with
from tests.orchestrator.conftest import interactions

EXPECTED = [
    (RunStatus.ANSWERED, 3),  # simple question
    (RunStatus.ANSWERED, 2),  # meta question
    (RunStatus.ANSWERED, 4),  # one correction
    (RunStatus.NEEDS_CLARIFICATION, 1),  # ambiguous
]


@pytest.fixture(scope="module")
def vcr_cassette_dir() -> str:
    return str(demo_cassette().parent)


@pytest.fixture
def default_cassette_name() -> str:
    return demo_cassette().stem


@pytest.mark.vcr
def test_demo_questions_follow_the_call_budget(
    demo_db: Path, model_endpoint: tuple[str, str], vcr
) -> None:
    session = DemoSession(demo_db, ApproveAll(), base_url=model_endpoint[0])

    results = [session.ask(q) for q in DEMO_QUESTIONS]

    assert [(r.status, r.llm_calls) for r in results] == EXPECTED
    assert interactions(vcr) == 10
    # 10 requests under 5 per 60 s: the limiter held the demo back, on the virtual clock.
    assert session.simulated_wait_s > 0


def test_demo_replays_offline_from_the_committed_cassette(demo_db: Path) -> None:
    session = DemoSession.replaying(demo_db, ApproveAll())

    results = [session.ask(q) for q in DEMO_QUESTIONS]

    assert [(r.status, r.llm_calls) for r in results] == EXPECTED
    session.transport.assert_all_played()
    assert all(r.answer for r in results[:3])
    assert results[3].clarification_questions


def _terminal(*answers: str) -> tuple[TerminalReviewer, io.StringIO]:
    said = io.StringIO()
    replies = iter(answers)
    reviewer = TerminalReviewer(
        console=Console(file=said, width=200), input=lambda _prompt: next(replies)
    )
    return reviewer, said


def test_a_rejection_in_the_demo_ends_rejected_with_its_reason(demo_db: Path) -> None:
    reviewer, _ = _terminal("r", "revenue must exclude returns")
    session = DemoSession.replaying(demo_db, reviewer)
    check_edits_with(reviewer, session.pipeline)

    result = session.ask(TOP_CATEGORIES)

    assert result.status == RunStatus.REJECTED and result.exit_code == 4
    assert result.error is not None
    assert (result.error.code, result.error.message) == (
        "rejected_by_reviewer",
        "revenue must exclude returns",
    )
    # The answer about a rejection is not in the recording: said as a warning, not as the status.
    assert any(w.startswith("the answer could not be written") for w in result.warnings)


def test_an_unsafe_edit_in_the_demo_is_refused_on_the_spot_and_asked_again(demo_db: Path) -> None:
    reviewer, said = _terminal("e", "DELETE FROM orders", "", "a")
    session = DemoSession.replaying(demo_db, reviewer)
    check_edits_with(reviewer, session.pipeline)

    result = session.ask(TOP_CATEGORIES)

    assert "Edited SQL refused" in said.getvalue()
    assert result.status == RunStatus.ANSWERED  # approved when asked again: the recording held
    assert [a.status for a in result.approvals] == ["approved"]
