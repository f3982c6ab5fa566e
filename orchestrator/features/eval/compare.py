"""Execution accuracy: is the result a question got the same as the gold result?

Results are compared as multisets of rows (order ignored) unless the gold says the order matters:
gold SQL whose outermost query has ORDER BY, or ``expected_rows`` marked ``ordered``. Column
names are ignored and so is column order: a result whose columns are a permutation of the
gold's, with the same rows under that permutation, is the same result (as Spider's execution
accuracy counts it). Values are compared after normalising: integers and integral floats are
equal (``2 == 2.0``), other floats are rounded to 6 decimal places, text is compared exactly.

Example:
    >>> same_result([[1, "a"], [2, "b"]], [["b", 2.0], ["a", 1]], ordered=False)
    True
    >>> same_result([[1], [2]], [[2], [1]], ordered=True)
    False
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import permutations
from typing import Any

__all__ = ["gold_is_ordered", "normalise", "same_result"]

#: Column permutations tried at most (6 columns: 720); wider results compare in column order.
_MAX_PERMUTED_COLUMNS = 6


def normalise(value: Any) -> Any:
    """A value as compared: numbers by value (6 decimals), everything else as it is."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        return round(value, 6)
    return value


def _rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(normalise(v) for v in row) for row in rows]


def same_result(
    got: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], *, ordered: bool
) -> bool:
    """True when ``got`` is ``gold``'s result: the same rows (in order, when ``ordered``), under
    the identity or some permutation of the columns."""
    a, b = _rows(got), _rows(gold)
    if len(a) != len(b):
        return False
    if not a:
        return True
    width = len(b[0])
    if any(len(r) != width for r in a) or any(len(r) != width for r in b):
        return False
    if _equal(a, b, ordered):
        return True
    if width > _MAX_PERMUTED_COLUMNS:
        return False
    # Only permutations that map each column to one holding the same values can work.
    columns_a = [Counter(r[i] for r in a) for i in range(width)]
    columns_b = [Counter(r[i] for r in b) for i in range(width)]
    for order in permutations(range(width)):
        if all(columns_a[order[i]] == columns_b[i] for i in range(width)):
            moved = [tuple(r[i] for i in order) for r in a]
            if _equal(moved, b, ordered):
                return True
    return False


def _equal(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]], ordered: bool) -> bool:
    return a == b if ordered else Counter(a) == Counter(b)


def gold_is_ordered(sql: str, dialect: str) -> bool:
    """True when the outermost query of ``sql`` has ORDER BY (its result order is the answer).
    SQL that does not parse is taken as unordered: the database's error says what is wrong."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return False
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    return isinstance(tree, exp.Query) and tree.args.get("order") is not None
