"""Files of questions in, files of results out, for ``sqlgate batch``.

Questions: plain text (one per line; blank lines and ``#`` comments skipped), CSV with a
``question`` column, or JSONL objects with a ``question`` key. Results: JSONL (one result object
per line) or CSV, chosen by the output's extension, written and flushed one result at a time
and made durable (``fsync``) once per stage, by ``sync()``, and when the file is closed.

A re-run resumes: results already in the output with a final status are kept (the file is first
rewritten atomically without anything else, such as a line cut short by Ctrl-C) and their
questions are skipped.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from orchestrator.core.csv_cells import QUOTE, from_spreadsheet, spreadsheet_safe
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.result import RunResult, RunStatus

#: Statuses that a re-run keeps; the others (rate limited, model or database errors, cancelled)
#: are asked again.
FINAL_STATUSES = frozenset(
    {
        RunStatus.ANSWERED,
        RunStatus.NEEDS_CLARIFICATION,
        RunStatus.REJECTED,
        RunStatus.UNSAFE,
        RunStatus.EXECUTION_FAILED,
        RunStatus.EXECUTION_IN_DOUBT,
        RunStatus.TIMED_OUT,
        RunStatus.INVALID_INPUT,
    }
)

CSV_FIELDS = [
    "question",
    "status",
    "answer",
    "sql",
    "row_count",
    "truncated",
    "warnings",
    "llm_calls",
    "error",
    "run_id",
]


def read_questions(path: Path) -> list[str]:
    """The questions of ``path`` in order (.txt, .csv or .jsonl)."""
    if not path.is_file():
        raise ConfigurationError(f"no such file: {path}")
    suffix = path.suffix.lower()
    with path.open(encoding="utf-8", newline="") as handle:
        if suffix == ".csv":
            reader = csv.DictReader(handle)
            if not reader.fieldnames or "question" not in [
                f.strip().lower() for f in reader.fieldnames
            ]:
                raise ConfigurationError(
                    f"{path} has no 'question' column (columns: {reader.fieldnames})"
                )
            column = next(f for f in reader.fieldnames if f.strip().lower() == "question")
            questions = [(row.get(column) or "").strip() for row in reader]
        elif suffix in (".jsonl", ".ndjson"):
            questions = []
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    questions.append(str(json.loads(line)["question"]).strip())
                except (json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise ConfigurationError(
                        f"{path}:{number}: not a JSON object with a 'question' key"
                    ) from exc
        else:
            questions = [
                line.strip()
                for line in handle
                if line.strip() and not line.lstrip().startswith("#")
            ]
    questions = [q for q in questions if q]
    if not questions:
        raise ConfigurationError(f"{path} holds no questions")
    return questions


#: A batch file's field (CSV column or JSON key) holding what the asker adds to a question.
HINT_FIELDS = ("hint", "evidence")


def read_hints(path: Path) -> dict[str, str]:
    """question -> its hint, from a .csv column or .jsonl key ``hint`` (or ``evidence``);
    empty for a .txt file or a file without such a field (``read_questions`` checks the file)."""
    suffix = path.suffix.lower()
    hints: dict[str, str] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        if suffix == ".csv":
            reader = csv.DictReader(handle)
            fields = {f.strip().lower(): f for f in reader.fieldnames or []}
            column = fields.get("question")
            given = next((fields[f] for f in HINT_FIELDS if f in fields), None)
            if column is None or given is None:
                return {}
            rows = [((r.get(column) or "").strip(), (r.get(given) or "").strip()) for r in reader]
        elif suffix in (".jsonl", ".ndjson"):
            rows = []
            for line in handle:
                entry = json.loads(line) if line.strip() else None
                if isinstance(entry, dict) and "question" in entry:
                    hint = next((entry[f] for f in HINT_FIELDS if entry.get(f)), "")
                    rows.append((str(entry["question"]).strip(), str(hint).strip()))
        else:
            return {}
    for question, hint in rows:
        if question and hint:
            hints[question] = hint
    return hints


class ResultWriter:
    """Appends results to a .jsonl or .csv file, one flushed record at a time.

    ``write`` hands each record to the operating system at once (a crash of this process loses
    nothing written); ``sync`` makes what was written durable on disk (``fsync``), which the
    batch command asks for once per stage, not once per record. A record lost with the machine
    is only asked again by the next run: the file is resumed from what it holds.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.format = _format_of(path)
        self.done: dict[str, dict[str, Any]] = {}
        self._handle: TextIO | None = None
        self._csv: Any = None
        self._unsynced = False

    def resume(self) -> dict[str, dict[str, Any]]:
        """Keep the final results already in the file; return them by question."""
        if not self.path.exists():
            return {}
        kept = [
            r for r in self._read_existing() if r.get("status") in {s.value for s in FINAL_STATUSES}
        ]
        self.done = {r["question"]: r for r in kept}
        self._rewrite(list(self.done.values()))
        return self.done

    def reopen(self) -> list[dict[str, Any]]:
        """Every complete record already in the file, whatever its status (the file is first
        rewritten atomically without a line cut short); ``batch --distributed`` writes from the
        run records and only needs to know what is there."""
        if not self.path.exists():
            return []
        records = self._read_existing()
        self._rewrite(records)
        return records

    def settle(self, results: list[RunResult], run_ids: set[str]) -> None:
        """Rewrite the file (atomically) so it holds each of ``results`` once, in order, in place
        of anything written for the same runs or questions (a record cut short, a result a
        later run record replaced); other records stay, before them."""
        questions = {r.question for r in results}
        others = [
            r
            for r in (self._read_existing() if self.path.exists() else [])
            if r.get("run_id") not in run_ids and r.get("question") not in questions
        ]
        self._rewrite(others + [r.model_dump(mode="json") for r in results])

    def __enter__(self) -> ResultWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists() or self.path.stat().st_size == 0
        self._handle = self.path.open("a", encoding="utf-8", newline="")
        if self.format == "csv":
            self._csv = csv.DictWriter(self._handle, fieldnames=CSV_FIELDS, quoting=QUOTE)
            if new:
                self._csv.writeheader()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle:
            self.sync()
            self._handle.close()

    def write(self, result: RunResult) -> None:
        assert self._handle is not None, "use ResultWriter as a context manager"
        record = result.model_dump(mode="json")
        if self.format == "jsonl":
            self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            self._csv.writerow(_csv_row(record))
        self._handle.flush()
        self._unsynced = True

    def sync(self) -> None:
        """Make every record written so far durable (one ``fsync``; none when nothing is new)."""
        if self._handle is not None and self._unsynced:
            os.fsync(self._handle.fileno())
            self._unsynced = False

    def _read_existing(self) -> list[dict[str, Any]]:
        records = []
        with self.path.open(encoding="utf-8", newline="") as handle:
            if self.format == "csv":
                records = [
                    {k: from_spreadsheet(v) if isinstance(v, str) else v for k, v in r.items()}
                    for r in csv.DictReader(handle)
                    if r.get("question")
                ]
            else:
                for line in handle:
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue  # a line cut short by an interruption: asked again
        return records

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        fd, tmp = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                if self.format == "csv":
                    writer = csv.DictWriter(handle, fieldnames=CSV_FIELDS, quoting=QUOTE)
                    writer.writeheader()
                    writer.writerows(_csv_row(r) for r in records)
                else:
                    handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def pending_questions(questions: list[str], done: dict[str, Any]) -> Iterator[tuple[int, str]]:
    """(index, question) for every question without a kept result, each question once."""
    seen: set[str] = set()
    for index, question in enumerate(questions):
        if question in done or question in seen:
            continue
        seen.add(question)
        yield index, question


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise ConfigurationError(f"--out must end in .jsonl or .csv, not {path.name!r}")


def _csv_row(record: dict[str, Any]) -> dict[str, Any]:
    """The CSV row of a result record (or of a row read back from a CSV file): text cells a
    spreadsheet never evaluates (``csv_cells``), the run id so a re-run knows what it wrote."""
    error = record.get("error") or {}
    if isinstance(error, str):  # read back from a CSV file
        error_text = error
    else:
        error_text = f"{error.get('code')}: {error.get('message')}" if error else ""
    warnings = record.get("warnings") or []
    row = {
        "question": record["question"],
        "status": record["status"],
        "answer": record.get("answer") or "",
        "sql": record.get("sql") or "",
        "row_count": "" if record.get("row_count") in (None, "") else record["row_count"],
        "truncated": "true" if record.get("truncated") in (True, "true") else "false",
        "warnings": warnings if isinstance(warnings, str) else "; ".join(warnings),
        "llm_calls": record.get("llm_calls", 0),
        "error": error_text,
        "run_id": record.get("run_id") or "",
    }
    return {k: spreadsheet_safe(v) if isinstance(v, str) else v for k, v in row.items()}
