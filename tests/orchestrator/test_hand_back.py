"""A run handed back (a stopping worker) or taken over asks nothing more of the model: every
LLM call of a run first checks that this process still holds the run's lease."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from orchestrator.core.checkpoint import StartedCheckpoint
from orchestrator.core.database import TargetDatabase
from orchestrator.core.lease import LeaseLost, hand_back_all
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.state_db import StateDatabase
from ratelimit import SlidingWindowLimiter
from tests.orchestrator.celery_cluster import TimedScript
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer


def test_a_run_handed_back_mid_run_makes_no_more_model_calls(tmp_path: Path, demo_db: Path) -> None:
    state = StateDatabase(f"sqlite:///{tmp_path / 'state.sqlite'}")
    state.setup()
    script = TimedScript(0.0)
    handed_at: list[int] = []

    def progress(stage: str, done: int = 0, total: int = 0) -> None:
        # Batch 1 answered: the worker is told to stop and hands its runs back now.
        if stage == "exploring schema" and not handed_at:
            handed_at.append(len(script.arrivals))
            assert hand_back_all()

    questions = [sc.PRODUCT_COUNT, sc.COUNT_QUESTIONS[0]]
    state.runs.create(  # queued, as `batch --distributed` records it for the workers
        "run_handed",
        f"sqlite:///{demo_db}",
        StartedCheckpoint(run_id="run_handed", questions=questions),
        status="queued",
        login=DatabaseLogin(""),  # a database file has no login
    )
    with ScriptedLLMServer(script) as model:
        pipeline = Pipeline(
            TargetDatabase(f"sqlite:///{demo_db}"),
            LLMClient(
                LLMSettings(model="sqlgate-scripted", base_url=model.base_url, api_key="x"),
                limiter=SlidingWindowLimiter(limit=100, window=60.0),
                http_client=httpx2.Client(),  # the scripted server, a real local one
            ),
            None,  # a worker's pipeline: the run pauses at the gate, recorded and leased
            approval_store=state.approvals,
            run_store=state.runs,
            progress=progress,
        )
        with pytest.raises(LeaseLost):
            pipeline.run_batch(questions, run_id="run_handed")

    assert handed_at == [1]  # one batched reasoning call before the hand-back
    assert len(script.arrivals) == 1  # and none after it
    stored = state.runs.load("run_handed")
    assert stored.status == "running" and stored.lease_expired()  # any worker takes it over
    state.close()
