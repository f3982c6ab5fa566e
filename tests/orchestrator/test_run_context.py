"""One pipeline, many runs at once; checkpoints of every version load."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa

from approvals import ApproveAll, SqlApprovalStore
from orchestrator.core.checkpoint import (
    CHECKPOINT_VERSION,
    FinishedCheckpoint,
    PausedCheckpoint,
    load_checkpoint,
)
from orchestrator.core.errors import CheckpointError
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from tests.orchestrator.conftest import Harness, interactions
from tests.scripted_llm import scenarios as sc

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.vcr
def test_twenty_runs_at_once_through_one_pipeline(harness: Harness, demo_url: str, vcr) -> None:
    limiter = harness.limiter(limit=1000, mode="wait", max_wait=60.0)
    pipeline = harness.pipeline(demo_url, ApproveAll(), llm=harness.llm(limiter))
    questions = sc.COUNT_QUESTIONS
    assert len(questions) == 20

    with ThreadPoolExecutor(max_workers=len(questions)) as pool:
        results = list(pool.map(pipeline.ask, questions))

    engine = sa.create_engine(demo_url)
    with engine.connect() as conn:
        for question, result in zip(questions, results, strict=True):
            assert result.question == question and result.status == RunStatus.ANSWERED
            # Each run counts its own calls: 1 (the four Batch-1 agents), 2, 3.
            assert result.llm_calls == 3
            assert [t.llm_call for t in result.trace if t.llm_call is not None] == [
                1,
                1,
                1,
                1,
                2,
                3,
            ]
            expected = conn.exec_driver_sql(sc.SCENARIOS[question].sql).scalar()
            assert result.rows_preview == [[expected]]
            assert result.answer is not None and f"There are {expected} " in result.answer
            assert {t.agent for t in result.trace} >= {"SQLGenerator", "SQLExecutor"}
    engine.dispose()
    assert len({r.run_id for r in results}) == 20
    assert len({r.sql for r in results}) == 20
    assert interactions(vcr) == 60


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_a_version_1_paused_checkpoint_loads_typed() -> None:
    stored = _fixture("checkpoint_v1_paused.json")

    checkpoint = load_checkpoint(stored["checkpoint"])

    assert isinstance(checkpoint, PausedCheckpoint) and checkpoint.version == CHECKPOINT_VERSION
    [(call_id, pending)] = checkpoint.pending.items()
    assert (pending.question_id, pending.ok) == ("q1", True)
    [question] = checkpoint.questions
    assert question.status == RunStatus.AWAITING_APPROVAL
    assert question.db_schema is not None and question.db_schema.tables
    assert question.sql and question.sql.startswith("SELECT")
    assert checkpoint.calls_made == 2 and checkpoint.cycle == 1
    # What is written now reads back the same.
    again = load_checkpoint(json.loads(checkpoint.model_dump_json(by_alias=True)))
    assert again == checkpoint


def test_a_version_1_finished_checkpoint_loads_its_results() -> None:
    stored = _fixture("checkpoint_v1_finished.json")

    checkpoint = load_checkpoint(stored["checkpoint"])

    assert isinstance(checkpoint, FinishedCheckpoint)
    [result] = checkpoint.results
    assert result.status == RunStatus.ANSWERED and result.row_count == 8


def test_a_checkpoint_from_a_newer_sqlgate_is_refused() -> None:
    with pytest.raises(CheckpointError, match="upgrade sqlgate"):
        load_checkpoint({"version": CHECKPOINT_VERSION + 1, "kind": "paused"})
    with pytest.raises(CheckpointError):
        load_checkpoint({"version": 2, "kind": "paused", "run_id": "r"})


def test_a_state_database_written_by_version_1_resumes_its_run(tmp_path: Path) -> None:
    """The whole state file of a paused run, as the earlier sqlgate left it."""
    state = tmp_path / "state.sqlite3"
    shutil.copy(FIXTURES / "state_v1_paused.sqlite3", state)
    url = f"sqlite:///{state}"
    approvals, runs = SqlApprovalStore(url), RunStore(url)
    approvals.setup()
    runs.setup()

    [stored] = runs.list()
    run = runs.load(stored["run_id"])

    assert run.status == "awaiting_approval"
    assert isinstance(run.checkpoint, PausedCheckpoint)
    [record] = approvals.pending_batches()
    assert record.batch_id == run.checkpoint.batch_id
    assert {item.call_id for item in record.batch.pending} == set(run.checkpoint.pending)
