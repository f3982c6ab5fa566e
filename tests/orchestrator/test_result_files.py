"""``write_result_file``: CSV or JSONL by extension, written whole or not at all."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.core.errors import ConfigurationError
from orchestrator.core.result_files import write_result_file


def test_csv_and_jsonl_hold_every_row(tmp_path: Path) -> None:
    rows = [[1, "a,b", None], [2, 'say "hi"', {"k": [1]}]]

    assert write_result_file(tmp_path / "r.csv", ["id", "text", "extra"], iter(rows)) == 2
    with (tmp_path / "r.csv").open(newline="") as handle:
        assert list(csv.reader(handle)) == [
            ["id", "text", "extra"],
            ["1", "a,b", ""],
            ["2", 'say "hi"', '{"k": [1]}'],
        ]

    assert write_result_file(tmp_path / "r.jsonl", ["id", "id", "x"], iter(rows)) == 2
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert lines[0] == {"id": 1, "id_2": "a,b", "x": None}  # no key hides another


def test_an_error_half_way_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "r.csv"
    target.write_text("the previous result\n")

    def failing() -> Iterator[list[int]]:
        yield [1]
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_result_file(target, ["n"], failing())

    assert target.read_text() == "the previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv"]


@pytest.mark.parametrize("name", ["r.xlsx", "r", "missing/r.csv"])
def test_a_file_it_cannot_write_is_refused_first(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigurationError):
        write_result_file(tmp_path / name, ["n"], iter([[1]]))
    assert not (tmp_path / name).exists()
