"""Distributed batches in the state database: one id per input and options, recorded once with
its queued runs (also when two commands record it at the same moment), found again unchanged."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.core.batches import batch_id_for
from orchestrator.core.checkpoint import StartedCheckpoint
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.state_db import StateDatabase

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"db": "sqlite:///shop.db", "out": "/tmp/out.jsonl", "run_size": 2, "timeout": None}


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateDatabase]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_database")
    database = StateDatabase(url)
    database.setup()
    yield database
    database.close()


def test_the_batch_id_follows_the_input_content_and_every_option() -> None:
    same = batch_id_for(b"a\nb\n", OPTIONS)
    assert same == batch_id_for(b"a\nb\n", dict(reversed(list(OPTIONS.items()))))
    others = {
        batch_id_for(b"a\nb\nc\n", OPTIONS),
        *(batch_id_for(b"a\nb\n", {**OPTIONS, key: "other"}) for key in OPTIONS),
    }
    assert same not in others and len(others) == len(OPTIONS) + 1


def test_a_batch_is_recorded_once_with_its_queued_runs_and_found_again(
    state: StateDatabase,
) -> None:
    chunks = [["q1", "q2"], ["q3"]]
    recorded = state.batches.record(
        "batch_abc", "sqlite:///shop.db", chunks, options=OPTIONS, login=DatabaseLogin("")
    )
    again = state.batches.record(
        "batch_abc", "sqlite:///shop.db", [["other"]], options=OPTIONS, login=DatabaseLogin("")
    )

    assert recorded.created and not again.created
    assert again.runs == recorded.runs and [r.questions for r in again.runs] == chunks
    for run in recorded.runs:
        stored = state.runs.load(run.run_id)
        assert stored.status == "queued" and stored.owner is None
        assert isinstance(stored.checkpoint, StartedCheckpoint)
        assert stored.checkpoint.questions == run.questions
    assert state.batches.load("batch_none") is None


def test_two_commands_recording_one_batch_at_once_share_one_set_of_runs(
    state: StateDatabase,
) -> None:
    found = []
    barrier = threading.Barrier(4)

    def record() -> None:
        other = StateDatabase(state.url)  # each its own engine, as another process
        barrier.wait()
        found.append(
            other.batches.record(
                "batch_race",
                "sqlite:///shop.db",
                [["q1"], ["q2"]],
                options={},
                login=DatabaseLogin(""),
            )
        )
        other.close()

    threads = [threading.Thread(target=record) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sum(b.created for b in found) == 1 and len(found) == 4
    assert len({tuple(r.run_id for r in b.runs) for b in found}) == 1
    assert len(state.runs.list(limit=100)) == 2


def test_a_broker_that_never_answers_ends_the_command_after_its_patience(
    tmp_path: Path, demo_db: Path
) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text("How many products are in each category?\n")
    env = {
        **os.environ,
        "SQLGATE_BROKER_URL": "redis://127.0.0.1:9/0",  # nothing listens there
        "SQLGATE_BROKER_PATIENCE": "3",
        "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 'state.sqlite'}",
    }
    command = [sys.executable, "-m", "orchestrator.cli", "batch", str(questions)]
    command += ["--db", f"sqlite:///{demo_db}", "--out", str(tmp_path / "out.jsonl")]
    done = subprocess.run(
        command + ["--distributed", "--yes"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    message = " ".join(done.stderr.split())
    assert done.returncode == 2, message
    assert "Traceback" not in message
    assert message.count("trying again in") >= 2, message  # it retried with backoff first
    assert "the broker has not answered for" in message
    assert "the same command again follows them" in message
    state = StateDatabase(env["SQLGATE_STATE_URL"])
    assert [r["status"] for r in state.runs.list()] == ["queued"]  # recorded for the next try
    state.close()
