"""``batch --distributed`` writes from the run records: ``reopen`` keeps every complete record
(whatever its status) and drops a line cut short; ``settle`` leaves the file holding each of the
batch's results once, in order, beside records that are not the batch's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from orchestrator.core.batch_io import ResultWriter
from orchestrator.core.result import RunError, RunResult, RunStatus


def _result(run_id: str, question: str, status: RunStatus = RunStatus.ANSWERED) -> RunResult:
    error = None if status is RunStatus.ANSWERED else RunError(code="x", message="went wrong")
    return RunResult(run_id=run_id, question=question, status=status, answer="a", error=error)


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_settle_replaces_what_the_file_held_for_the_batch_with_the_run_records(
    tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"out.{suffix}"
    mine = [_result("run_b_0", "q1"), _result("run_b_0", "q2"), _result("run_b_1", "q3")]
    with ResultWriter(path) as writer:
        writer.write(_result("run_other", "unrelated question"))
        writer.write(_result("run_b_0", "q1", RunStatus.LLM_ERROR))  # the file said otherwise
        writer.write(mine[2])
    if suffix == "jsonl":
        path.write_text(path.read_text() + '{"question": "q2", "sta')  # cut short

    kept = ResultWriter(path).reopen()
    ResultWriter(path).settle(mine, {"run_b_0", "run_b_1"})

    assert [r["question"] for r in kept] == ["unrelated question", "q1", "q3"]
    if suffix == "jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    else:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    assert [(r["question"], r["status"]) for r in rows] == [
        ("unrelated question", "answered"),
        ("q1", "answered"),
        ("q2", "answered"),
        ("q3", "answered"),
    ]
    if suffix == "csv":
        assert rows[1]["error"] == "" and rows[1]["truncated"] == "false"
