"""CSV written by sqlgate (``ask --out rows.csv``, batch results in .csv) opens in a spreadsheet
as text, never as a formula, whatever the cell holds; reading a results file back gives every
value as it was, and each row carries its run id (a re-run after a kill knows what it wrote)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from orchestrator.core.batch_io import ResultWriter
from orchestrator.core.csv_cells import from_spreadsheet, spreadsheet_safe
from orchestrator.core.result import RunResult, RunStatus
from orchestrator.core.result_files import write_result_file

HOSTILE = [
    "=1+1",
    "+SUM(A1:A2)",
    "-2+3",
    "@SUM(A1)",
    "\t=1",
    "\r=1",
    '   =HYPERLINK("http://x")',
    "\u00a0=1",
    "\u3000=1",
    "x;=1+1",
    "x, =1+1",
    "x|@SUM(A1)",
    "a\t-1+1",
    "＝1+1",
    "＋1",
    "－1+1",
    "＠SUM(A1)",
    " ＝1",
    "'=1",
    "''",
]
HARMLESS = ["plain", "-5", "+1.5e3", "3.14", "", "a-b", "x=1", "O'Brien", "émile"]
TRIGGERS = set("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
BLANKS = " \t\r\n\u00a0\u3000"


def _formula_somewhere(cell: str) -> bool:
    """Would a spreadsheet splitting ``cell`` on any common separator see a formula?"""
    if cell.startswith("'") or re.fullmatch(r"[+-]?\d+(\.\d+)?([eE][+-]?\d+)?", cell):
        return False  # text, or a plain number
    pieces = [cell]
    for separator in ",;|\t":
        pieces = [p for piece in pieces for p in piece.split(separator)]
    return any(p.lstrip(BLANKS)[:1] in TRIGGERS for p in pieces if p.lstrip(BLANKS))


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_cell_is_neutralised_and_restored(value: str) -> None:
    cell = spreadsheet_safe(value)
    assert cell.startswith("'") and not _formula_somewhere(cell)
    assert from_spreadsheet(cell) == value


@pytest.mark.parametrize("value", HARMLESS)
def test_a_harmless_cell_is_left_as_it_is(value: str) -> None:
    assert spreadsheet_safe(value) == value == from_spreadsheet(value)


def test_a_rows_file_quotes_and_neutralises_every_text_cell(tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    rows = [[value, 7, 1.5, None] for value in HOSTILE + HARMLESS]
    write_result_file(out, ["=header", "n", "x", "empty"], iter(rows))
    with out.open(encoding="utf-8", newline="") as handle:
        text = handle.read()
        handle.seek(0)
        read = list(csv.reader(handle))
    assert read[0][0] == "'=header"
    for written, (value, *_rest) in zip(read[1:], rows, strict=True):
        assert not _formula_somewhere(written[0]), written
        assert from_spreadsheet(written[0]) == value
        assert written[1:3] == ["7", "1.5"]
    # Every text cell is quoted, so no separator inside one can start a new cell.
    assert '"\'x;=1+1"' in text and "\n7," not in text


def _result(run_id: str, question: str, answer: str) -> RunResult:
    return RunResult(
        run_id=run_id, question=question, status=RunStatus.ANSWERED, answer=answer, sql="SELECT 1"
    )


def test_a_results_file_reads_back_exactly_and_carries_the_run_id(tmp_path: Path) -> None:
    out = tmp_path / "results.csv"
    first = _result("run_a", "=1+1 how many?", "x;=HYPERLINK(1)")
    second = _result("run_b", "＠SUM(A1)", "-5")
    with ResultWriter(out) as writer:
        writer.write(first)
        writer.write(second)
    with out.open(encoding="utf-8", newline="") as handle:
        raw = list(csv.DictReader(handle))
    assert [r["run_id"] for r in raw] == ["run_a", "run_b"]
    assert not any(_formula_somewhere(v) for r in raw for v in r.values() if v)

    # A re-run after a kill: what the file holds is known by (run id, question), and settling
    # the run's results leaves each question once, restored exactly.
    records = ResultWriter(out).reopen()
    assert {(r["run_id"], r["question"]) for r in records} == {
        ("run_a", "=1+1 how many?"),
        ("run_b", "＠SUM(A1)"),
    }
    ResultWriter(out).settle([first], {"run_a"})
    again = ResultWriter(out).reopen()
    assert sorted(r["question"] for r in again) == ["=1+1 how many?", "＠SUM(A1)"]
    assert {r["question"]: r["answer"] for r in again}["=1+1 how many?"] == "x;=HYPERLINK(1)"
    kept = ResultWriter(out).resume()
    assert set(kept) == {"=1+1 how many?", "＠SUM(A1)"}
