"""The envelope of earned trust: the literal values reviewers actually approved.

A template earns auto-approval from approvals of statements with some values; trust then covers
statements of that template whose values stay inside what those approvals saw, never beyond:

- a ``LIMIT`` (or ``FETCH``) value at most the largest one reviewed;
- any other number between the smallest and the largest value reviewed at that place;
- a string one of the values reviewed at that place.

Anything outside (``LIMIT 1000000`` after ``LIMIT 20``, ``amount = -1e300``, another customer's
name) goes to a person. The literals are compared place by place in the statement's syntax tree,
which two statements of one template share.

Example:
    >>> seen = [literal_values("SELECT id FROM orders WHERE total > 100 LIMIT 20", "sqlite")]
    >>> outside_envelope(literal_values("SELECT id FROM orders WHERE total > 100 LIMIT 5", "sqlite"), seen)
    >>> outside_envelope(literal_values("SELECT id FROM orders WHERE total > 100 LIMIT 1000000", "sqlite"), seen)
    'LIMIT 1000000 is above the reviewed 20'
    >>> outside_envelope(literal_values("SELECT id FROM orders WHERE total > -1e300 LIMIT 20", "sqlite"), seen)
    '-1e300 is outside the reviewed 100..100'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

__all__ = ["LiteralValue", "envelope_text", "literal_values", "outside_envelope"]

LiteralKind = Literal["limit", "number", "string"]


@dataclass(frozen=True)
class LiteralValue:
    """One literal of a statement: where it stands (a row bound, another number, a string)."""

    kind: LiteralKind
    value: str


def literal_values(sql: str, dialect: str | None) -> tuple[LiteralValue, ...] | None:
    """The literals of ``sql`` in syntax-tree order; None when it cannot be parsed."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return None
    found = []
    for node in tree.walk():
        if not isinstance(node, exp.Literal):
            continue
        if node.is_string:
            found.append(LiteralValue("string", node.this))
        elif isinstance(node.parent, exp.Limit | exp.Fetch):
            found.append(LiteralValue("limit", node.this))
        else:  # a minus sign is its own node: -1e300 is Neg(1e300)
            sign = "-" if isinstance(node.parent, exp.Neg) else ""
            found.append(LiteralValue("number", sign + node.this))
    return tuple(found)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def outside_envelope(
    statement: Sequence[LiteralValue] | None,
    seen: Sequence[Sequence[LiteralValue] | None],
    *,
    values: bool = True,
) -> str | None:
    """Why ``statement``'s values are outside what the approvals ``seen`` covered; None when
    inside. Unknown literals (None) on either side are outside: they cannot be compared.
    ``values=False`` bounds only the row limits (``[auto_approval] envelope = "limit"``)."""
    if statement is None or not seen or any(s is None for s in seen):
        return "the reviewed values are not known"
    known = [s for s in seen if s is not None]
    if any(len(s) != len(statement) for s in known):
        return "its literals do not line up with the reviewed statements"
    for place, literal in enumerate(statement):
        reviewed_here = [s[place] for s in known]
        if any(v.kind != literal.kind for v in reviewed_here):
            return f"{literal.value} stands where the reviewed statements had another kind of value"
        if literal.kind != "limit" and not values:
            continue
        if literal.kind == "string":
            if literal.value not in {v.value for v in reviewed_here}:
                return f"'{literal.value}' is not one of the reviewed values"
            continue
        number = _number(literal.value)
        reviewed = [n for n in (_number(v.value) for v in reviewed_here) if n is not None]
        if number is None or not reviewed:
            return f"{literal.value} is not a number the reviewed ones can bound"
        if literal.kind == "limit":
            if number > max(reviewed):
                return f"LIMIT {literal.value} is above the reviewed {_shown(max(reviewed))}"
        elif not min(reviewed) <= number <= max(reviewed):
            return (
                f"{literal.value} is outside the reviewed "
                f"{_shown(min(reviewed))}..{_shown(max(reviewed))}"
            )
    return None


def envelope_text(seen: Sequence[Sequence[LiteralValue] | None], *, values: bool = True) -> str:
    """The envelope in one line, for the audit log (``LIMIT <= 20; 100..250; 'shipped'``)."""
    known = [s for s in seen if s is not None]
    if not known or not known[0]:
        return "no literals"
    parts = []
    for place, first in enumerate(known[0]):
        here = [s[place] for s in known if place < len(s)]
        if first.kind != "limit" and not values:
            continue
        if first.kind == "string":
            parts.append(" | ".join(sorted({repr(v.value) for v in here})))
            continue
        numbers = [n for n in (_number(v.value) for v in here) if n is not None]
        if not numbers:
            continue
        if first.kind == "limit":
            parts.append(f"LIMIT <= {_shown(max(numbers))}")
        else:
            parts.append(f"{_shown(min(numbers))}..{_shown(max(numbers))}")
    return "; ".join(parts) or "no bounded literal"


def _shown(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)
