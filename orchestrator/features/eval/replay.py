"""An eval from recorded cassettes alone: no model, no network, no API key.

``replay_eval`` is what the pytest plugin's fixture calls, and ``replay_client`` the model
client ``sqlgate eval --replay`` runs with.

Example::

    report = replay_eval("questions.yaml", "eval-cassettes/", db="sqlite:///shop.db")
    assert report.totals.replay_misses == 0
    assert report.totals.execution_accuracy >= 0.9
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.features.eval.cassettes import CassetteReplay, recorded_endpoint

if TYPE_CHECKING:
    from orchestrator.core.hooks import RunHooks
    from orchestrator.core.llm import LLMClient, LLMSettings
    from orchestrator.features.eval.cases import EvalCase
    from orchestrator.features.eval.report import EvalReport
    from safety import Policy

__all__ = ["replay_client", "replay_eval"]


def replay_client(
    directory: Path, settings: LLMSettings | None = None, *, model: str | None = None
) -> tuple[LLMClient, CassetteReplay]:
    """The model client of a replay and its cassettes: the recorded model name and path, the
    cassettes as its only transport, no rate limit to wait for and no backoff to sleep."""
    from orchestrator.core.llm import LLMClient, LLMSettings
    from ratelimit import ManualClock, SlidingWindowLimiter

    base, recorded_model = recorded_endpoint(directory)
    replay = CassetteReplay(directory)
    clock = ManualClock()
    chosen = (settings or LLMSettings()).model_copy(
        update={"model": model or recorded_model, "base_url": base, "api_key": None}
    )
    limiter = SlidingWindowLimiter(
        limit=1_000_000, window=60.0, clock=clock, sleep=clock.sleep, mode="wait"
    )
    client = LLMClient(chosen, limiter=limiter, http_client=replay.client, sleep=clock.sleep)
    return client, replay


def replay_eval(
    questions: str | Path | list[EvalCase],
    cassettes: str | Path,
    *,
    db: str | None = None,
    db_dir: str | Path | None = None,
    policy: Policy | None = None,
    hooks: RunHooks | None = None,
) -> EvalReport:
    """Run the eval ``questions`` (a file, or cases) from the cassettes in ``cassettes`` on the
    database ``db`` (or the questions' own under ``db_dir``) and return its report; ``hooks``:
    the features the runs use (None: clarification and risk estimates, never memory).

    Raises ``EvalFileError`` / ``ConfigurationError`` (one sentence) for a bad file or folder.
    """
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.result_rows import ResultRowStore
    from orchestrator.features.eval.cases import load_cases
    from orchestrator.features.eval.runner import EvalRun, resolve_databases

    if isinstance(questions, list):
        cases, source = questions, "questions"
    else:
        cases, source = load_cases(Path(questions)), Path(questions).name
    urls = resolve_databases(cases, db, Path(db_dir) if db_dir is not None else None)
    llm, replay = replay_client(Path(cassettes))
    with tempfile.TemporaryDirectory(prefix="sqlgate-eval-") as spool:
        rows = ResultRowStore(f"sqlite:///{spool}/rows.sqlite")
        try:
            return EvalRun(
                llm=llm,
                open_database=lambda url: TargetDatabase(url, policy=policy),
                approvals=None,
                result_rows=rows,
                mode="replay",
                cassettes=replay,
                hooks=hooks,
            ).run(cases, urls, source)
        finally:
            rows.close()
