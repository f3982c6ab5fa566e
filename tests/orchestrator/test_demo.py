"""``sqlgate demo``: its cassette is recorded here, and replayed offline by the product itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from approvals import ApproveAll
from orchestrator.demo import DEMO_QUESTIONS, DemoSession, demo_cassette
from orchestrator.result import RunStatus
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
