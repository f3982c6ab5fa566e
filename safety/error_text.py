"""Database error text reduced to its error class, so that it cannot carry a value out.

Engines quote the offending value in their errors: PostgreSQL ``invalid input syntax for type
integer: "<value>"``, MariaDB ``Truncated incorrect DOUBLE value: '<value>'``, DuckDB
``Conversion Error: Could not convert string '<value>' to INT32``. When the policy protects
columns, such a text must not reach the analyst, the result, the trace or a correction prompt:
``error_class`` keeps the words that name the kind of error (up to the first quote, with numbers
taken out) and the engine's code (PostgreSQL's SQLSTATE, MySQL's error number), and drops the
rest. The executor logs the full text at debug level only (see ``agents.sql_executor``).

Example:
    >>> error_class('invalid input syntax for type integer: "ann@one.example"', "22P02")
    'invalid input syntax for type integer (SQLSTATE 22P02; details withheld: the policy protects columns)'
    >>> error_class("Conversion Error: Type INT64 with value 51000 can't be cast")
    'Conversion Error: Type INT64 with value <n> can (details withheld: the policy protects columns)'
"""

from __future__ import annotations

import re

__all__ = ["error_class", "error_code"]

_QUOTES = re.compile(r"[\"'`\u2018\u2019\u201c\u201d]")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d.,:eE+-]*(?![\w])")
_MAX_WORDS = 12
_TAILS = (" LINE ", " DETAIL:", " CONTEXT:", " HINT:", " (error ")


def error_class(message: str, code: str | int | None = None) -> str:
    """The kind of error ``message`` describes, without any value it quoted."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    quote = _QUOTES.search(first)
    kept = first[: quote.start()] if quote else first
    for marker in _TAILS:  # what the cleaned message appends: statement echo, detail, errno
        kept = kept.split(marker, 1)[0]
    kept = _NUMBER.sub("<n>", kept)
    words = kept.replace("\t", " ").split()
    kind = " ".join(words[:_MAX_WORDS]).rstrip(" :;,.(=") or "the database refused the statement"
    where = f"SQLSTATE {code}; " if isinstance(code, str) and code else ""
    if isinstance(code, int):
        where = f"error {code}; "
    return f"{kind} ({where}details withheld: the policy protects columns)"


def error_code(exc: BaseException) -> str | int | None:
    """The engine's own code of a driver error: PostgreSQL's SQLSTATE, MySQL's error number."""
    orig = getattr(exc, "orig", exc)
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate
    args: tuple[object, ...] = tuple(getattr(orig, "args", ()) or ())
    first = args[0] if args else None
    return first if isinstance(first, int) else None
