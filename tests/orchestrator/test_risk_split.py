"""A batch splits its approval by risk level: with one reviewer (``batch --yes``, a terminal), a
statement needing two reviewers does not hold back or cancel the others. It waits at the gate
for a second reviewer when the run is stored, or ends ``cancelled`` saying why when it is not;
the others run."""

from __future__ import annotations

from pathlib import Path

import httpx2

from approvals import ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.result import RunStatus
from orchestrator.wiring import run_hooks
from ratelimit import SlidingWindowLimiter
from safety import Policy

POLICY = Policy.from_toml_text(
    '[risk]\nsensitive_columns = ["customers.email"]\nsensitive = "high"\n[risk.quorum]\nhigh = 2\n'
)
QUESTIONS = ["how many customers?", "customer e-mails", "how many regions?"]
STATEMENTS = [
    "SELECT count(*) AS n FROM customers",
    "SELECT customer_id, email FROM customers ORDER BY customer_id LIMIT 3",
    "SELECT count(*) AS n FROM regions",
]


def _llm() -> LLMClient:
    """A model that has nothing to say: the analyst's own SQL needs no call."""
    return LLMClient(
        LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=5, window=60.0, mode="fail_fast"),
        http_client=httpx2.Client(transport=CassetteTransport([])),
    )


def test_one_reviewer_runs_the_others_and_the_high_one_is_cancelled_saying_why(
    demo_db: Path,
) -> None:
    pipeline = Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}", policy=POLICY),
        _llm(),
        ApproveAll(),
        config=None,
        hooks=run_hooks(),
    )
    low, high, other = pipeline.run_batch(QUESTIONS, statements=STATEMENTS)
    assert low.status is RunStatus.ANSWERED and low.row_count == 1
    assert other.status is RunStatus.ANSWERED and other.row_count == 1
    assert high.status is RunStatus.CANCELLED and high.row_count is None
    assert high.error is not None and "needs 2 reviewers" in high.error.message
    assert "customers.email" in high.error.message
    assert "@" not in high.model_dump_json()
