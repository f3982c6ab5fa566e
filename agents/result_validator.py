"""ResultValidator: cheap sanity checks on a result before it is explained to anyone.

Each warning starts with a stable code and a colon, so scripts can match on the prefix:

    empty_result:      the statement returned no rows
    null_only_column:  a column is NULL in every returned row
    negative_count:    a count/total/quantity-like column holds negative values
    duplicate_key:     rows repeat a key (given, or a leading id / *_id column)
    row_cap_hit:       more rows existed than the row cap kept
    byte_cap_hit:      the rows kept reached the result's byte budget (max_result_bytes)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["ResultValidator", "WARNING_CODES"]

WARNING_CODES = (
    "empty_result",
    "null_only_column",
    "negative_count",
    "duplicate_key",
    "row_cap_hit",
    "byte_cap_hit",
)

COUNT_WORDS = frozenset({"count", "cnt", "total", "totals", "qty", "quantity", "quantities", "num"})


class RowsLike(Protocol):
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool


class ResultValidator:
    """Checks an ``ExecutionResult`` (or anything with ``columns``, ``rows``, ``truncated``).

    Example:
        >>> from agents.sql_executor import ExecutionResult
        >>> ResultValidator().check(ExecutionResult(columns=["order_count"], rows=[[-2]], row_count=1))
        ["negative_count: column 'order_count' has negative values (lowest -2)"]
    """

    def __init__(self, max_examples: int = 3) -> None:
        self.max_examples = max_examples

    def check(self, result: RowsLike, key_columns: Sequence[str] | None = None) -> list[str]:
        columns = list(result.columns)
        rows = list(result.rows)
        warnings: list[str] = []
        if not rows:
            warnings.append("empty_result: the query returned no rows")
        else:
            warnings += self._null_only(columns, rows)
            warnings += self._negative_counts(columns, rows)
            warnings += self._duplicate_keys(columns, rows, key_columns)
        if getattr(result, "truncated", False) and getattr(result, "cut_by", None) == "bytes":
            budget = getattr(result, "byte_cap", 0)
            warnings.append(
                f"byte_cap_hit: only the first {len(rows)} rows were kept, the most that fit in "
                f"the {budget} bytes a result may hold; the full result is larger"
            )
        elif getattr(result, "truncated", False):
            cap = getattr(result, "row_cap", len(rows))
            warnings.append(
                f"row_cap_hit: only the first {cap} rows were kept; the full result is larger"
            )
        return warnings

    def _null_only(self, columns: list[str], rows: list[list[Any]]) -> list[str]:
        return [
            f"null_only_column: column '{name}' is NULL in every row"
            for i, name in enumerate(columns)
            if all(row[i] is None for row in rows)
        ]

    def _negative_counts(self, columns: list[str], rows: list[list[Any]]) -> list[str]:
        out = []
        for i, name in enumerate(columns):
            if not _is_count_like(name):
                continue
            negatives = [row[i] for row in rows if _is_number(row[i]) and row[i] < 0]
            if negatives:
                out.append(
                    f"negative_count: column '{name}' has negative values (lowest {min(negatives)})"
                )
        return out

    def _duplicate_keys(
        self, columns: list[str], rows: list[list[Any]], key_columns: Sequence[str] | None
    ) -> list[str]:
        if key_columns:
            by_name = {c.casefold(): i for i, c in enumerate(columns)}
            positions = [by_name[k.casefold()] for k in key_columns if k.casefold() in by_name]
        else:
            positions = []
            for i, name in enumerate(columns):  # the leading run of id columns
                if not _is_id_like(name):
                    break
                positions.append(i)
        if not positions:
            return []
        counts = Counter(tuple(row[i] for i in positions) for row in rows)
        repeated = [key for key, n in counts.items() if n > 1]
        if not repeated:
            return []
        names = ", ".join(columns[i] for i in positions)
        examples = ", ".join(
            str(key[0]) if len(key) == 1 else "(" + ", ".join(map(str, key)) + ")"
            for key in repeated[: self.max_examples]
        )
        extra = sum(counts[key] - 1 for key in repeated)
        return [f"duplicate_key: {extra} rows repeat a key ({names}), e.g. {examples}"]


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def _is_count_like(name: str) -> bool:
    words = _words(name)
    if not words:
        return False
    return bool(COUNT_WORDS.intersection(words)) or (words[0] in {"n", "number"} and len(words) > 1)


def _is_id_like(name: str) -> bool:
    lowered = name.lower()
    return lowered == "id" or lowered.endswith("_id")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
