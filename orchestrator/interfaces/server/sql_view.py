"""SQL as a reviewer reads it: pretty-printed by sqlglot, and the line diff of an edit.

Formatting is for reading only: what is approved, stored and run is always the exact text of the
item (or of the validated edit), never this rendering.

Example:
    >>> print(pretty_sql("select a, count(*) from t group by a", "sqlite"))
    SELECT
      a,
      COUNT(*)
    FROM t
    GROUP BY
      a
    >>> [(line.op, line.text) for line in sql_diff("SELECT a FROM t", "SELECT b FROM t", "sqlite")]
    [(' ', 'SELECT'), ('-', '  a'), ('+', '  b'), (' ', 'FROM t')]
"""

from __future__ import annotations

import difflib
from typing import Literal

import sqlglot
from pydantic import BaseModel, Field
from sqlglot.errors import SqlglotError


class DiffLine(BaseModel):
    op: Literal[" ", "-", "+"] = Field(description="' ' unchanged, '-' removed, '+' added")
    text: str = Field(description="The line, as pretty-printed")


def pretty_sql(sql: str, dialect: str | None) -> str:
    """``sql`` pretty-printed in ``dialect``; the text unchanged when sqlglot cannot read it."""
    try:
        rendered = sqlglot.transpile(sql, read=dialect, write=dialect, pretty=True)
    except SqlglotError:
        return sql
    return ";\n".join(rendered) if rendered else sql


def sql_diff(before: str, after: str, dialect: str | None) -> list[DiffLine]:
    """The line diff from ``before`` to ``after``, both pretty-printed, so layout alone never
    shows as a change."""
    old = pretty_sql(before, dialect).splitlines()
    new = pretty_sql(after, dialect).splitlines()
    lines: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            lines += [DiffLine(op=" ", text=t) for t in old[i1:i2]]
            continue
        lines += [DiffLine(op="-", text=t) for t in old[i1:i2]]
        lines += [DiffLine(op="+", text=t) for t in new[j1:j2]]
    return lines
