"""Cassette replay for orchestrator tests.

Every test marked ``@pytest.mark.vcr`` replays ``cassettes/<module>/<test>.yaml``: record mode
``none`` by default (a request with no recording fails), request bodies matched (a prompt change
shows), credentials and machine-specific headers filtered, and every recorded interaction must be
played. To re-record against the scripted server::

    pytest tests/orchestrator --record-mode=rewrite

To record against a real OpenAI-compatible endpoint instead, also set SQLGATE_RECORD_BASE_URL,
SQLGATE_RECORD_MODEL and OPENAI_API_KEY (the assertions on scripted answers will then need care).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import orchestrator.core.llm
from orchestrator.core.database import TargetDatabase
from orchestrator.core.hooks import RunHooks
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline, PipelineConfig
from orchestrator.features.eval.cassettes import VCR_CONFIG
from orchestrator.wiring import run_hooks
from ratelimit import ManualClock, SlidingWindowLimiter
from tests.conftest import ROOT
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer

CASSETTES = ROOT / "cassettes"
SCRIPTED_MODEL = "sqlgate-scripted"


@pytest.fixture(scope="module")
def vcr_config() -> dict[str, Any]:
    """The product's own cassette settings (``sqlgate eval --record`` writes alike)."""
    return dict(VCR_CONFIG)


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    return str(CASSETTES / request.module.__name__.split(".")[-1])


@pytest.fixture(autouse=True)
def _replay_guard(
    request: pytest.FixtureRequest, record_mode: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Cassette tests may build a model client; afterwards every recorded reply must have played."""
    if request.node.get_closest_marker("vcr") is None:
        yield
        return
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    cassette = request.getfixturevalue("vcr")
    yield
    call = getattr(request.node, "rep_call", None)
    if call is None or not call.passed:
        return  # skipped (a service URL unset) or already failed: nothing more to say
    if record_mode == "none":
        unplayed = len(cassette.data) - cassette.play_count
        assert unplayed == 0, (
            f"{unplayed} recorded interaction(s) of {cassette._path} were not played"
        )


@pytest.fixture
def scripted_server() -> Iterator[ScriptedLLMServer]:
    """The scripted OpenAI-compatible server (it answers only while recording)."""
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        yield server


@pytest.fixture
def model_endpoint(scripted_server: ScriptedLLMServer) -> tuple[str, str]:
    base = os.environ.get("SQLGATE_RECORD_BASE_URL")
    if base:
        return base, os.environ.get("SQLGATE_RECORD_MODEL", "gpt-4o-mini")
    return scripted_server.base_url, SCRIPTED_MODEL


class Harness:
    """Builds pipelines whose model traffic goes through VCR (replayed or recorded)."""

    def __init__(self, endpoint: tuple[str, str]) -> None:
        self.base_url, self.model = endpoint
        self.clock = ManualClock()

    def limiter(self, **kwargs: Any) -> SlidingWindowLimiter:
        kwargs.setdefault("limit", 5)
        kwargs.setdefault("window", 60.0)
        return SlidingWindowLimiter(clock=self.clock, sleep=self.clock.sleep, **kwargs)

    def llm(self, limiter: SlidingWindowLimiter | None = None, **settings: Any) -> LLMClient:
        return LLMClient(
            LLMSettings(model=self.model, base_url=self.base_url, **settings),
            limiter=limiter or self.limiter(mode="wait", max_wait=3600.0),
            sleep=self.clock.sleep,
        )

    def pipeline(
        self,
        db_url: str,
        reviewer: Any,
        *,
        llm: LLMClient | None = None,
        config: PipelineConfig | None = None,
        statement_timeout_s: float = 30.0,
        stores: tuple[Any, Any] | None = None,
        hooks: RunHooks | None = None,
    ) -> Pipeline:
        """A pipeline with every feature but memory, as the entry points wire it (``hooks``:
        others, ``RunHooks()`` for none)."""
        database = TargetDatabase(db_url, statement_timeout_s=statement_timeout_s)
        approval_store, run_store = stores or (None, None)
        return Pipeline(
            database,
            llm or self.llm(),
            reviewer,
            config=config,
            approval_store=approval_store,
            run_store=run_store,
            hooks=run_hooks() if hooks is None else hooks,
        )


@pytest.fixture
def harness(model_endpoint: tuple[str, str]) -> Harness:
    return Harness(model_endpoint)


@pytest.fixture
def demo_url(demo_db: Path) -> str:
    return f"sqlite:///{demo_db}"


def interactions(cassette: Any) -> int:
    """Recorded interactions of the cassette (at a test's end: the requests the test made)."""
    return len(cassette.data)


def requests_so_far(cassette: Any) -> int:
    """Model requests made so far in this test, whether replaying or recording."""
    return (
        cassette.play_count
        if str(cassette.record_mode) in ("none", "RecordMode.NONE")
        else len(cassette.data)
    )


CassetteCount = Callable[[Any], int]
__all__ = ["Harness", "interactions", "requests_so_far"]
