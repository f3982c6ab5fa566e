"""The eval file: the user's questions, each with its gold SQL or the rows it should return.

Formats, by extension: ``.json`` (a list of objects, or ``{"questions": [...]}``), ``.jsonl``
(one object a line) and ``.yaml``/``.yml`` (like JSON). Each object::

    {"id": "top-categories",            # optional: default q1, q2, ... (its place in the file)
     "question": "Top 5 categories by revenue in 2025?",
     "gold_sql": "SELECT ...",           # or "expected_rows": [["Books", 12.5], ...]
     "ordered": false,                   # optional, expected_rows only: compare in order
     "db": "shop"}                       # optional: a URL, or a name under --db-dir

The Spider dev format (``dev.json``: ``db_id``, ``question``, ``query``) is read as it is: each
entry's ``db_id`` names its database under ``--db-dir``.

Every problem is one sentence naming the file and the entry (``EvalFileError``).

Example:
    >>> parse_entries([{"question": "How many?", "gold_sql": "SELECT 1"}], "f.json")[0].id
    'q1'
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from orchestrator.core.errors import ConfigurationError

__all__ = ["EvalCase", "EvalFileError", "load_cases", "parse_entries", "select_cases"]

#: An id names the question's cassette file, so it must be a safe file name.
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_KEYS = {"id", "question", "gold_sql", "expected_rows", "ordered", "db"}
_SPIDER_KEYS = {"db_id", "question", "query"}


class EvalFileError(ConfigurationError):
    """An eval file that cannot be read, or an entry in it that is not a question to evaluate."""

    code = "eval_file_invalid"


class EvalCase(BaseModel):
    """One question to evaluate and how to tell a right answer."""

    id: str = Field(description="Stable id: names the question in reports and its cassette")
    question: str = Field(description="The question, in plain language")
    gold_sql: str | None = Field(default=None, description="SQL whose result is the right one")
    expected_rows: list[list[Any]] | None = Field(
        default=None, description="The right rows, when there is no gold SQL"
    )
    ordered: bool = Field(default=False, description="expected_rows must come in this order")
    db: str | None = Field(default=None, description="Database URL or name under --db-dir")


def load_cases(path: Path) -> list[EvalCase]:
    """The cases of ``path`` in file order. Raises ``EvalFileError`` (one sentence)."""
    if not path.is_file():
        raise EvalFileError(f"no such eval file: {path}")
    suffix = path.suffix.lower()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalFileError(f"cannot read {path}: {exc}") from None
    if suffix == ".json":
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalFileError(
                f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
    elif suffix in (".jsonl", ".ndjson"):
        data = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise EvalFileError(f"{path}:{number} is not valid JSON ({exc.msg})") from None
    elif suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise EvalFileError(f"{path} is not valid YAML{where}") from None
    else:
        raise EvalFileError(
            f"{path}: unknown eval file type {suffix or '(none)'!r}; use .json, .jsonl or .yaml"
        )
    return parse_entries(data, str(path))


def select_cases(
    cases: list[EvalCase],
    *,
    db_ids: list[str] | None = None,
    per_db: int | None = None,
    limit: int | None = None,
) -> list[EvalCase]:
    """The questions of the databases named ``db_ids`` (all when None), at most ``per_db`` of
    each database, at most ``limit`` in all, in file order. Raises ``EvalFileError`` when
    nothing is left.

    Example:
        >>> c = parse_entries([{"question": f"q{n}", "gold_sql": "SELECT 1", "db": d}
        ...                    for n, d in enumerate("aabbb")], "f.json")
        >>> [x.id for x in select_cases(c, per_db=1)], [x.id for x in select_cases(c, db_ids=["b"], limit=2)]
        (['q1', 'q3'], ['q3', 'q4'])
    """
    wanted = set(db_ids) if db_ids else None
    taken: dict[str | None, int] = {}
    kept = []
    for case in cases:
        if wanted is not None and case.db not in wanted:
            continue
        if per_db is not None and taken.get(case.db, 0) >= per_db:
            continue
        taken[case.db] = taken.get(case.db, 0) + 1
        kept.append(case)
    kept = kept[:limit] if limit is not None else kept
    if not kept:
        raise EvalFileError(
            f"no question left to evaluate (databases {', '.join(sorted(wanted))})"
            if wanted
            else "no question left to evaluate"
        )
    return kept


def parse_entries(data: Any, source: str) -> list[EvalCase]:
    """Cases from parsed file content (a list, or a mapping with a ``questions`` list)."""
    if isinstance(data, dict) and "questions" in data:
        data = data["questions"]
    if not isinstance(data, list):
        raise EvalFileError(f"{source} holds no list of questions")
    if not data:
        raise EvalFileError(f"{source} holds no questions")
    cases = [_case(entry, number, source) for number, entry in enumerate(data, start=1)]
    seen: dict[str, int] = {}
    for number, case in enumerate(cases, start=1):
        if case.id in seen:
            raise EvalFileError(
                f"{source}: entry {number} repeats the id {case.id!r} of entry {seen[case.id]}"
            )
        seen[case.id] = number
    return cases


def _case(entry: Any, number: int, source: str) -> EvalCase:
    where = f"{source}: entry {number}"
    if not isinstance(entry, dict):
        raise EvalFileError(f"{where} is not an object with a 'question'")
    if _SPIDER_KEYS <= entry.keys() and "gold_sql" not in entry:
        entry = {
            "id": f"q{number}",
            "question": entry["question"],
            "gold_sql": entry["query"],
            "db": entry["db_id"],
        }
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise EvalFileError(
            f"{where} has unknown key(s) {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(sorted(_KEYS))}"
        )
    question = entry.get("question")
    if not isinstance(question, str) or not question.strip():
        raise EvalFileError(f"{where} has no 'question' text")
    gold, rows = entry.get("gold_sql"), entry.get("expected_rows")
    if (gold is None) == (rows is None):
        raise EvalFileError(f"{where} needs exactly one of 'gold_sql' and 'expected_rows'")
    if gold is not None and (not isinstance(gold, str) or not gold.strip()):
        raise EvalFileError(f"{where}: 'gold_sql' is not SQL text")
    if rows is not None and not (isinstance(rows, list) and all(isinstance(r, list) for r in rows)):
        raise EvalFileError(f"{where}: 'expected_rows' is not a list of rows (lists of values)")
    case_id = str(entry.get("id", f"q{number}"))
    if not _ID.match(case_id):
        raise EvalFileError(
            f"{where}: id {case_id!r} cannot name a cassette file (letters, digits, '_', '.', '-')"
        )
    ordered = entry.get("ordered", False)
    if not isinstance(ordered, bool):
        raise EvalFileError(f"{where}: 'ordered' is not true or false")
    if ordered and rows is None:
        raise EvalFileError(
            f"{where}: 'ordered' applies to expected_rows (gold SQL says it with ORDER BY)"
        )
    db = entry.get("db")
    if db is not None and (not isinstance(db, str) or not db.strip()):
        raise EvalFileError(f"{where}: 'db' is not a database URL or name")
    return EvalCase(
        id=case_id,
        question=" ".join(question.split()),
        gold_sql=gold,
        expected_rows=rows,
        ordered=ordered,
        db=db,
    )
