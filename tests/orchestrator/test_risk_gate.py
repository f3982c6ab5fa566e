"""Risk through the pipeline: a high-risk statement needs two reviewers, so one reviewer at a
terminal cannot run it alone; without the risk it runs as before."""

from __future__ import annotations

import pytest

from approvals import ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.result import RunStatus
from safety import Policy
from tests.orchestrator.conftest import Harness
from tests.scripted_llm import scenarios as sc

SENSITIVE = Policy.from_toml_text('[risk]\nsensitive_columns = ["categories.name"]')


@pytest.mark.vcr
def test_one_reviewer_cannot_run_a_high_risk_statement_alone(
    harness: Harness, demo_url: str
) -> None:
    reviewer = ApproveAll()
    pipeline = Pipeline(
        TargetDatabase(demo_url, policy=SENSITIVE), harness.llm(), reviewer, config=None
    )
    [result] = pipeline.run_batch([sc.PRODUCT_COUNT])
    assert result.status is RunStatus.CANCELLED
    assert result.row_count is None  # nothing ran
    assert result.error is not None and "needs 2 reviewers" in result.error.message
