"""Values of label columns too large to index, looked up in the database at ask time.

The value index keeps the values of columns with at most ``ValueLimits.per_column`` distinct
values; a column of people's names, cities or tags has more, so "Tell me everything about Roni."
would reach no table. Such columns are remembered when the index is built (``ValueIndex.wide``)
and searched here, only for the question's words that no table or column word covers, through
the same read-only engine, under the run's policy (``readable``) and a strict time budget:

- one bounded statement per (column, phrase), a case-insensitive match of the phrase's words in
  order as a bound parameter (PostgreSQL and DuckDB ``ILIKE``, SQLite and MySQL ``LIKE``, whose
  default collations ignore ASCII case; each word as the question wrote it, accents included,
  anything between them: "Barddhaman Burdwan" finds "Barddhaman (Burdwan)"), ``LIMIT`` a few
  rows, then the rows kept only when the phrase is a whole run of words of the value;
- no statement starts after the deadline; PostgreSQL statements carry ``statement_timeout``,
  MySQL ones ``MAX_EXECUTION_TIME``, and SQLite's progress handler interrupts a statement that
  runs past the deadline; a statement that fails or is interrupted finds nothing.

Example:
    >>> phrases_to_search("who did roni kessler meet in 2019", lambda w: w == "meet")
    ['roni kessler']
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import sqlalchemy as sa

from agents.linking.terms import STOPWORDS

__all__ = [
    "MAX_PHRASES",
    "ROWS_PER_LOOKUP",
    "like_pattern",
    "phrases_to_search",
    "search_columns",
]

#: Phrases of one question searched at most (the longest runs of uncovered words first).
MAX_PHRASES = 3
#: Rows read per (column, phrase) statement.
ROWS_PER_LOOKUP = 5
#: Words shorter than this are never searched on their own.
MIN_WORD_CHARS = 3

#: (table, column, value as stored, phrase) of each hit.
Hit = tuple[str, str, str, str]


def phrases_to_search(normalized: str, known: Callable[[str], bool]) -> list[str]:
    """The runs of a normalized question's words that no schema word covers (``known``), with
    stopwords and numbers cut out, longest first, at most ``MAX_PHRASES``."""
    runs: list[list[str]] = [[]]
    for word in normalized.split():
        if word in STOPWORDS or word.isdigit() or known(word):
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append(word)
    phrases = [
        " ".join(run) for run in runs if run and (len(run) > 1 or len(run[0]) >= MIN_WORD_CHARS)
    ]
    return sorted(phrases, key=lambda p: -len(p.split()))[:MAX_PHRASES]


def like_pattern(phrase: str, surface: Mapping[str, str]) -> str:
    """The ``LIKE`` pattern of a normalized phrase: its words in order, each as the question
    wrote it (``surface``: normalized word -> written word), anything between and around them.

    Example:
        >>> like_pattern("pinar del rio", {"rio": "Río"})
        '%pinar%del%Río%'
    """
    return "%" + "%".join(surface.get(word, word) for word in phrase.split()) + "%"


def _operator(dialect: str) -> str:
    return "ILIKE" if dialect in ("postgresql", "duckdb") else "LIKE"


@contextlib.contextmanager
def _deadline_guard(conn: sa.Connection, dialect: str, deadline: float) -> Iterator[None]:
    """SQLite: interrupt a statement still running at ``deadline``."""
    raw = conn.connection.driver_connection if dialect == "sqlite" else None
    handler = getattr(raw, "set_progress_handler", None)
    if handler is None:
        yield
        return
    handler(lambda: 1 if time.monotonic() > deadline else 0, 2_000)
    try:
        yield
    finally:
        handler(None, 0)


def search_columns(
    engine: sa.Engine,
    columns: Sequence[tuple[str, str]],
    phrases: Sequence[str],
    *,
    budget_s: float,
    db_schema: str | None = None,
    normalize: Callable[[str], str],
    surface: Mapping[str, str] | None = None,
) -> list[Hit]:
    """Rows of ``columns`` whose value holds one of ``phrases`` as whole words, found within
    ``budget_s`` seconds (columns and phrases in the order given; what the time did not reach is
    not searched). ``surface`` maps a normalized word to the question's own spelling of it."""
    if not columns or not phrases or budget_s <= 0:
        return []
    deadline = time.monotonic() + budget_s
    dialect = engine.dialect.name
    quote = engine.dialect.identifier_preparer.quote
    prefix = f"{quote(db_schema)}." if db_schema else ""
    guarded = dialect == "postgresql"
    hits: list[Hit] = []
    with engine.connect() as conn, _deadline_guard(conn, dialect, deadline):
        for phrase in phrases:
            for table, column in columns:
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0:
                    return hits
                name = quote(column)
                hint = f"/*+ MAX_EXECUTION_TIME({left_ms}) */ " if dialect == "mysql" else ""
                sql = (
                    f"SELECT {hint}{name} FROM {prefix}{quote(table)} "
                    f"WHERE {name} {_operator(dialect)} :pattern LIMIT {ROWS_PER_LOOKUP}"
                )
                try:
                    with conn.begin_nested() if guarded else contextlib.nullcontext():
                        if guarded:
                            conn.exec_driver_sql(f"SET LOCAL statement_timeout = {left_ms}")
                        pattern = like_pattern(phrase, surface or {})
                        rows = conn.execute(sa.text(sql), {"pattern": pattern}).all()
                except sa.exc.SQLAlchemyError:
                    continue  # timed out, interrupted or unreadable: nothing found here
                for (value,) in rows:
                    text = str(value)
                    if f" {phrase} " in f" {normalize(text)} ":
                        hits.append((table, column, text, phrase))
                        break
    return hits
