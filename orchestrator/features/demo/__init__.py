"""``sqlgate demo``: the whole pipeline on a generated retail database, with no key and no network.

The model's replies come from a cassette recorded against sqlgate's own scripted OpenAI-compatible
server (tests/scripted_llm): they are scripted, not a real model's. Everything else is real: the
SQLite database, schema exploration, validation, the approval gate, execution, the rate limiter
(on a virtual clock, since replayed replies take no time: waits are reported, not slept).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.core.batching import Progress
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.hooks import RunHooks
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline, PipelineConfig
from orchestrator.features.standalone import standalone_hooks
from ratelimit import ManualClock, SlidingWindowLimiter

DEMO_MODEL = "sqlgate-scripted-demo"
DEMO_BASE_URL = "http://sqlgate-demo.invalid/v1"

TOP_CATEGORIES = "What were the top 5 product categories by revenue in 2025?"
TABLES_META = "Which tables are in this database and how are they related?"
ORDERS_BY_SEGMENT = "How many orders did each customer segment place in 2025?"
AMBIGUOUS = "Show me the best ones."

#: The demo's questions: a simple one, a meta one, one that needs a correction, an ambiguous one.
DEMO_QUESTIONS = [TOP_CATEGORIES, TABLES_META, ORDERS_BY_SEGMENT, AMBIGUOUS]


def demo_cassette() -> Path:
    """The recorded model replies the demo replays: package data, so a wheel install has it."""
    return Path(__file__).resolve().parent / "cassette.yaml"


class DemoSession:
    """A pipeline on the demo database, wired to a virtual clock and the given model transport;
    ``hooks``: its features (None: ``standalone_hooks()``, every feature but memory)."""

    def __init__(
        self,
        database_path: Path,
        reviewer: Any,
        *,
        base_url: str = DEMO_BASE_URL,
        http_client: Any | None = None,
        progress: Progress | None = None,
        hooks: RunHooks | None = None,
    ) -> None:
        self.transport: Any | None = None  # the replay transport, when replaying
        self.clock = ManualClock()
        self.limiter = SlidingWindowLimiter(
            limit=5,
            window=60.0,
            clock=self.clock,
            sleep=self.clock.sleep,
            mode="wait",
            max_wait=600.0,
        )
        self.llm = LLMClient(
            LLMSettings(model=DEMO_MODEL, base_url=base_url),
            limiter=self.limiter,
            http_client=http_client,
            sleep=self.clock.sleep,
        )
        self.database = TargetDatabase(f"sqlite:///{database_path}")
        self.pipeline = Pipeline(
            self.database,
            self.llm,
            reviewer,
            config=PipelineConfig(),
            progress=progress,
            hooks=hooks if hooks is not None else standalone_hooks(),
        )

    @classmethod
    def replaying(cls, database_path: Path, reviewer: Any, **kwargs: Any) -> DemoSession:
        """The session ``sqlgate demo`` runs: model replies replayed from the demo cassette."""
        import httpx2

        from orchestrator.core.replay import CassetteTransport

        cassette = demo_cassette()
        if not cassette.exists():
            raise ConfigurationError(
                f"the demo's recorded model replies are missing ({cassette}); the sqlgate "
                "installation is incomplete: reinstall it"
            )
        transport = CassetteTransport([cassette])
        session = cls(
            database_path, reviewer, http_client=httpx2.Client(transport=transport), **kwargs
        )
        session.transport = transport
        return session

    @property
    def simulated_wait_s(self) -> float:
        """Seconds the rate limiter made the demo wait, on its virtual clock."""
        return sum(self.clock.slept)

    def ask(self, question: str) -> Any:
        return self.pipeline.ask(question)
