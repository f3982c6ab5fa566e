"""sqlgate's pytest plugin: replay your own golden questions through the pipeline in a test.

Installed with sqlgate (entry point ``pytest11``), so pytest loads it in every run of the
environment: importing it imports nothing of sqlgate beyond this module. The fixture::

    def test_golden_questions(sqlgate_replay):
        report = sqlgate_replay("eval/questions.yaml", "eval/cassettes", db="sqlite:///shop.db")
        assert report.totals.replay_misses == 0      # the prompts still match the recordings
        assert report.totals.execution_accuracy >= 0.9

Record the cassettes once with ``sqlgate eval questions.yaml --db URL --approve-all --record
eval/cassettes`` against your model; the replay needs no model, no network and no API key.
Every statement is approved as ``sqlgate eval --approve-all`` (nothing remembered or trusted).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from orchestrator.features.eval.report import EvalReport

__all__ = ["sqlgate_replay"]

Replay = Callable[..., "EvalReport"]


@pytest.fixture
def sqlgate_replay() -> Replay:
    """``replay(questions, cassettes, *, db=None, db_dir=None, policy=None) -> EvalReport``:
    the questions (an eval file or a list of ``EvalCase``) answered from the cassettes in the
    folder ``cassettes`` (one ``<id>.yaml`` per question) on ``db`` (a URL), or on each
    question's own database under ``db_dir``."""

    def replay(
        questions: str | Path | list[Any],
        cassettes: str | Path,
        *,
        db: str | None = None,
        db_dir: str | Path | None = None,
        policy: Any = None,
    ) -> EvalReport:
        from orchestrator.features.eval.replay import replay_eval

        return replay_eval(questions, cassettes, db=db, db_dir=db_dir, policy=policy)

    return replay
