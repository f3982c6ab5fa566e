"""A full result written to a file, all or nothing: ``sqlgate ask --out rows.csv``.

CSV (a header row, then one line per row) or JSONL (one object per row, keyed by column), chosen
by the file's extension. The rows are written to a temporary file beside the target and renamed
over it only once every row is written, so a reader never sees half a result and an error leaves
the target as it was. Rows are taken from an iterator, so a large result never has to be in
memory at once.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "rows.jsonl"
    >>> write_result_file(out, ["id", "name"], iter([[1, "a"], [2, None]]))
    2
    >>> out.read_text().splitlines()
    ['{"id": 1, "name": "a"}', '{"id": 2, "name": null}']
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.core.csv_cells import QUOTE, spreadsheet_safe
from orchestrator.core.errors import ConfigurationError

__all__ = ["RESULT_FILE_SUFFIXES", "check_result_path", "write_result_file"]

RESULT_FILE_SUFFIXES = (".csv", ".jsonl", ".ndjson")


def check_result_path(path: Path) -> None:
    """Refuse, before anything runs, a file the result cannot be written to.

    Raises:
        ConfigurationError: an unknown extension, or a folder that does not exist.
    """
    if path.suffix.lower() not in RESULT_FILE_SUFFIXES:
        raise ConfigurationError(
            f"--out {path}: the result file must end in .csv or .jsonl (got {path.suffix or 'no extension'!r})"
        )
    if not path.parent.is_dir():
        raise ConfigurationError(f"--out {path}: the folder {path.parent} does not exist")
    if path.is_dir():
        raise ConfigurationError(f"--out {path} is a folder, not a file")


def write_result_file(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Write ``rows`` under ``columns`` to ``path`` atomically; return the number of rows.

    Raises:
        ConfigurationError: an unknown extension (nothing is written).
        OSError: the file could not be written (the target is left as it was).
    """
    check_result_path(path)
    names = _unique(columns)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, renamed or removed
        "w",
        encoding="utf-8",
        newline="",
        dir=path.parent,
        prefix=f".{path.name}.",
        suffix=".part",
        delete=False,
    )
    written = 0
    try:
        with handle:
            if path.suffix.lower() == ".csv":
                writer = csv.writer(handle, quoting=QUOTE)
                writer.writerow([spreadsheet_safe(name) for name in names])
                for row in rows:
                    writer.writerow([_csv_cell(v) for v in row])
                    written += 1
            else:
                for row in rows:
                    record = dict(zip(names, row, strict=True))
                    handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                    written += 1
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return written


def _csv_cell(value: Any) -> Any:
    """Numbers as numbers; everything else as text a spreadsheet never evaluates."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if isinstance(value, (dict, list)):
        return spreadsheet_safe(json.dumps(value, ensure_ascii=False, default=str))
    return spreadsheet_safe(str(value))


def _unique(columns: Sequence[str]) -> list[str]:
    """Column labels made unique (``name``, ``name_2``), so no JSONL key hides another."""
    used: set[str] = set()
    out = []
    for column in columns:
        label, n = str(column), 1
        while label in used:
            n += 1
            label = f"{column}_{n}"
        used.add(label)
        out.append(label)
    return out
