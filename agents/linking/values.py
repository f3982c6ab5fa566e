"""The value index: which columns hold the names, codes and labels a question mentions.

"Who finished second in the San Marino Grand Prix in 2006?" names no table or column; only a
value stored in one. For every text column of low-to-medium cardinality (at most
``ValueLimits.per_column`` distinct values among the first ``rows_read`` rows; a column with
more holds free text or identifiers, not labels) the distinct values are kept, and a question's
phrases (up to ``MAX_PHRASE_WORDS`` words) are looked up among them: a whole value matched is
strong evidence for its column's table, a rare word of a value weaker evidence.

Bounds: a column the ``readable`` predicate refuses (the policy's denied or not-allowed columns)
is never read; values longer than ``max_chars`` and values without a letter (numbers, dates)
are not kept; the whole index keeps at most ``total`` values (the per-column bound shrinks to
fit). ``refresh`` re-reads only the tables whose columns changed (or whose values are older
than ``max_age_s``), so keeping the index in step with the schema costs what changed.

Values are data: the index lives in memory only, and ``matches`` can be narrowed to the columns
a run may read (``readable``), so a role never sees values of columns it may not query.

Example:
    >>> index = ValueIndex.from_values({("races", "name"): ["San Marino Grand Prix", "Monaco Grand Prix"],
    ...                                 ("drivers", "surname"): ["Hamilton", "Schumacher"]})
    >>> [(m.table, m.column, m.value) for m in index.matches("Who won the san marino grand prix?")]
    [('races', 'name', 'San Marino Grand Prix')]
"""

from __future__ import annotations

import contextlib
import math
import re
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa

from agents.linking.lookup import phrases_to_search, search_columns
from agents.linking.terms import STOPWORDS
from agents.schema_explorer import TableInfo

__all__ = ["ValueIndex", "ValueLimits", "ValueMatch", "normalize_value"]

#: Question phrases up to this many words are looked up as whole values.
MAX_PHRASE_WORDS = 6
#: Distinct values read of every column first; only columns with more are read again.
_FIRST_READ = 100
_TEXT_TYPES = ("CHAR", "TEXT", "STRING", "CLOB", "ENUM", "NAME", "CITEXT")
_TOKEN = re.compile(r"\w+")
_ASCII_TOKEN = re.compile(r"[a-z0-9]+")
#: Reads a column's distinct values: (table, column, how many at most) -> values.
ValueReader = Callable[[str, str, int], list[str]]
Readable = Callable[[str, str], bool]


@dataclass(frozen=True)
class ValueLimits:
    """How much the value index reads and keeps."""

    per_column: int = 1000  # distinct values kept per column; a column with more is skipped
    rows_read: int = 20_000  # rows read per column to find its distinct values
    max_chars: int = 60  # longer values are text, not names
    total: int = 750_000  # values across the whole index at most (one a column at least)
    max_age_s: float | None = None  # values older than this are read again on refresh
    search_s: float = 0.25  # ask-time search of the columns with more values, per question


@dataclass(frozen=True)
class ValueMatch:
    """A phrase of the question found among a column's values."""

    table: str
    column: str
    value: str  # as stored
    phrase: str  # the question's words it matched
    whole: bool  # the whole value (True) or one rare word of it (False)
    strength: float  # how much it says about the table: longer and rarer is stronger


@dataclass
class _Column:
    table: str
    column: str
    values: tuple[str, ...]


@dataclass
class _TableEntry:
    signature: tuple[tuple[str, str], ...]
    read_at: float
    columns: list[_Column] = field(default_factory=list)
    wide: list[str] = field(default_factory=list)  # label columns with too many values to keep


def normalize_value(text: str) -> str:
    """Lower case, accents and punctuation dropped, words joined by one space.

    Example:
        >>> normalize_value("  Zürich-Oerlikon (ZH) ")
        'zurich oerlikon zh'
    """
    if text.isascii():  # the common case, without Unicode decomposition
        return " ".join(_ASCII_TOKEN.findall(text.lower()))
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch))
    return " ".join(_TOKEN.findall(plain.replace("_", " ")))


def _surface(text: str) -> dict[str, str]:
    """Normalized word -> the word as ``text`` writes it, for the words whose accents or case
    normalizing changed (``Río`` for ``rio``): a database's ``LIKE`` does not fold accents.

    Example:
        >>> _surface("Tell me about Pinar del Río and Boyacá")
        {'rio': 'Río', 'boyaca': 'Boyacá'}
    """
    out: dict[str, str] = {}
    for token in re.findall(r"[^\W_]+", text):
        if token.isascii():
            continue
        plain = normalize_value(token)
        if plain and " " not in plain:
            out.setdefault(plain, token)
    return out


def _kept(value: str, max_chars: int) -> bool:
    """A label: short, with a letter (numbers and dates are not looked up)."""
    # a cased letter changes under upper(); other scripts' letters are not ASCII
    return 0 < len(value) <= max_chars and (value.upper() != value.lower() or not value.isascii())


class ValueIndex:
    """Distinct values of a schema's label-like text columns, looked up by a question's phrases.

    Build it with ``ValueIndex.build(engine, tables, readable=...)`` (bounded reads through the
    engine) or ``ValueIndex.from_values`` (values already at hand). Read-only once built;
    ``refresh`` returns a new index.
    """

    def __init__(
        self,
        tables: Mapping[str, _TableEntry],
        limits: ValueLimits,
        *,
        skipped: int = 0,
        engine: sa.Engine | None = None,
        db_schema: str | None = None,
    ) -> None:
        self.limits = limits
        self._engine = engine  # searched at ask time for the wide columns' values
        self._db_schema = db_schema
        self._tables = dict(tables)
        self.skipped = skipped  # columns left out: too many distinct values, or the total reached
        self._columns: list[_Column] = [c for e in self._tables.values() for c in e.columns]
        # key -> one packed (column, position), or a tuple of them when several columns hold it
        exact: dict[str, int | tuple[int, ...]] = {}
        words: dict[str, list[int]] = {}
        longest = 0
        for column_id, column in enumerate(self._columns):
            seen: set[str] = set()
            for position, value in enumerate(column.values):
                key = normalize_value(value)
                code = column_id << 20 | position
                held = exact.get(key)
                if held is None:
                    exact[key] = code
                elif isinstance(held, int):
                    exact[key] = (held, code)
                else:
                    exact[key] = (*held, code)
                parts = key.split()
                longest = max(longest, len(parts))
                seen.update(parts)
            for word in seen:
                if len(word) > 2 and word not in STOPWORDS and not word.isdigit():
                    words.setdefault(word, []).append(column_id)
        self._exact = exact
        self._words = {k: tuple(v) for k, v in words.items()}
        self._longest = min(MAX_PHRASE_WORDS, longest)

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_values(
        cls,
        values: Mapping[tuple[str, str], Iterable[str]],
        limits: ValueLimits | None = None,
    ) -> ValueIndex:
        """An index of ``{(table, column): values}`` as given (bounded like ``build``)."""
        limits = limits or ValueLimits()
        tables: dict[str, _TableEntry] = {}
        skipped = 0
        for (table, column), found in values.items():
            kept = _distinct(found, limits.max_chars, limits.per_column)
            if kept is None:
                skipped += 1
                continue
            if not kept:
                continue
            entry = tables.setdefault(table, _TableEntry((), 0.0))
            entry.columns.append(_Column(table, column, kept))
        return cls(tables, limits, skipped=skipped)

    @classmethod
    def build(
        cls,
        engine: sa.Engine,
        tables: Mapping[str, TableInfo],
        *,
        readable: Readable | None = None,
        db_schema: str | None = None,
        limits: ValueLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> ValueIndex:
        """Read the values of ``tables``' label-like text columns through ``engine``."""
        return cls({}, limits or ValueLimits()).refresh(
            engine, tables, readable=readable, db_schema=db_schema, clock=clock
        )

    def refresh(
        self,
        engine: sa.Engine,
        tables: Mapping[str, TableInfo],
        *,
        readable: Readable | None = None,
        db_schema: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> ValueIndex:
        """A new index for ``tables``: unchanged tables keep their values, the rest are read.

        A table is read again when its text columns changed (names or types), when the columns
        ``readable`` allows changed, or when its values are older than ``limits.max_age_s``.
        """
        limits = self.limits
        now = clock()
        wanted: dict[str, tuple[tuple[str, str], ...]] = {}
        for name, info in tables.items():
            columns = tuple(
                (c.name, c.type)
                for c in info.columns
                if _is_text(c.type) and (readable is None or readable(name, c.name))
            )
            if columns:
                wanted[name] = columns
        kept: dict[str, _TableEntry] = {}
        to_read: list[str] = []
        for name, signature in wanted.items():
            old = self._tables.get(name)
            fresh = limits.max_age_s is None or now - (old.read_at if old else 0) < limits.max_age_s
            if old is not None and old.signature == signature and fresh:
                kept[name] = old
            else:
                to_read.append(name)
        skipped = 0
        entries = {name: _TableEntry(wanted[name], now) for name in to_read}
        if to_read:
            with _reading(engine, db_schema, limits) as read:
                # first every column up to a small bound (label columns end here), then the
                # columns with more share what the whole index may still hold
                held = sum(len(c.values) for e in kept.values() for c in e.columns)
                to_count = sum(len(wanted[name]) for name in to_read)
                first = min(
                    limits.per_column, _FIRST_READ, max(1, (limits.total - held) // to_count)
                )
                more: list[tuple[str, str]] = []
                for name in to_read:
                    for column, _ in wanted[name]:
                        sample = read(name, column, first)
                        found = _distinct(sample, limits.max_chars, first)
                        if found is None:
                            # more values than the first bound: read again only if they look
                            # like labels (not free text, numbers or dates)
                            if any(_kept(v, limits.max_chars) for v in sample):
                                more.append((name, column))
                            else:
                                skipped += 1
                        elif found:
                            entries[name].columns.append(_Column(name, column, found))
                left = limits.total - sum(
                    len(c.values) for e in (*kept.values(), *entries.values()) for c in e.columns
                )
                share = min(limits.per_column, left // max(len(more), 1))
                for name, column in more:
                    found = (
                        _distinct(read(name, column, share), limits.max_chars, share)
                        if share > first
                        else None
                    )
                    if found is None:
                        skipped += 1
                        entries[name].wide.append(column)  # searched at ask time instead
                    elif found:
                        entries[name].columns.append(_Column(name, column, found))
        kept.update(entries)
        return ValueIndex(kept, limits, skipped=skipped, engine=engine, db_schema=db_schema)

    # -- reading --------------------------------------------------------------------------

    @property
    def columns(self) -> int:
        """Columns whose values are indexed."""
        return len(self._columns)

    def __len__(self) -> int:
        """Values indexed."""
        return sum(len(c.values) for c in self._columns)

    @property
    def wide(self) -> list[tuple[str, str]]:
        """(table, column) of the label columns with too many values to keep: searched in the
        database at ask time (``search``)."""
        return [(t, c) for t, entry in self._tables.items() for c in entry.wide]

    def search(
        self,
        question: str,
        readable: Readable | None = None,
        *,
        known: Callable[[str], bool],
        budget_s: float | None = None,
    ) -> list[ValueMatch]:
        """The question's phrases that no schema word covers (``known`` says which words are
        covered), looked up in the wide columns ``readable`` allows, in the database, within
        ``budget_s`` (default ``limits.search_s``); see ``agents.linking.lookup``. Nothing
        without an engine (an index from ``from_values``)."""
        if self._engine is None:
            return []
        columns = [(t, c) for t, c in self.wide if readable is None or readable(t, c)]
        if not columns:
            return []
        phrases = phrases_to_search(normalize_value(question), known)
        hits = search_columns(
            self._engine,
            columns,
            phrases,
            budget_s=self.limits.search_s if budget_s is None else budget_s,
            db_schema=self._db_schema,
            normalize=normalize_value,
            surface=_surface(question),
        )
        holders: dict[str, set[str]] = {}
        for table, _, _, phrase in hits:
            holders.setdefault(phrase, set()).add(table)
        return [
            ValueMatch(
                table,
                column,
                value,
                phrase,
                True,
                (1.0 + 0.5 * (len(phrase.split()) - 1)) / math.log2(1.0 + len(holders[phrase])),
            )
            for table, column, value, phrase in hits
        ]

    def matches(self, question: str, readable: Readable | None = None) -> list[ValueMatch]:
        """The question's phrases found among the values, strongest first.

        Longer phrases are tried first and their words are not matched again inside them;
        a whole value found in one column is stronger than one found in many, and a single word
        of a longer value is weaker still. ``readable`` drops columns a run may not read.
        """
        tokens = normalize_value(question).split()
        if not tokens or not self._columns:
            return []
        taken = [False] * len(tokens)
        best: dict[tuple[int, str], ValueMatch] = {}
        # a two-letter word counts as a value only where the question writes it as a code
        # ("flights on UA"), never as the word it also is ("flights to us")
        codes = {w.lower() for w in re.findall(r"\b[A-Z][A-Z0-9]\b", question)}

        def keep(column_id: int, match: ValueMatch) -> None:
            key = (column_id, match.phrase)
            if key not in best or best[key].strength < match.strength:
                best[key] = match

        for n in range(min(self._longest, len(tokens)), 0, -1):
            for start in range(len(tokens) - n + 1):
                if any(taken[start : start + n]):
                    continue
                words = tokens[start : start + n]
                if all(w in STOPWORDS or w.isdigit() for w in words):
                    continue
                phrase = " ".join(words)
                held = self._exact.get(phrase)
                if held is None:
                    continue
                hits = (held,) if isinstance(held, int) else held
                hits = tuple(h for h in hits if self._allowed(h >> 20, readable))
                if not hits:
                    continue
                if n == 1 and len(words[0]) < 3 and words[0] not in codes:
                    continue
                tables = {self._columns[h >> 20].table for h in hits}
                rarity = 1.0 / math.log2(1.0 + len(tables))
                strength = (1.0 + 0.5 * (n - 1)) * rarity
                for h in hits:
                    column = self._columns[h >> 20]
                    value = column.values[h & 0xFFFFF]
                    keep(
                        h >> 20,
                        ValueMatch(column.table, column.column, value, phrase, True, strength),
                    )
                for i in range(start, start + n):
                    taken[i] = True
        for i, word in enumerate(tokens):
            if taken[i] or word in STOPWORDS or word.isdigit() or len(word) < 4:
                continue
            holders = [c for c in self._words.get(word, ()) if self._allowed(c, readable)]
            if not holders:
                continue
            tables = {self._columns[c].table for c in holders}
            strength = 0.4 / math.log2(1.0 + len(tables))
            for c in holders:
                column = self._columns[c]
                value = next(v for v in column.values if word in normalize_value(v).split())
                keep(c, ValueMatch(column.table, column.column, value, word, False, strength))
        return sorted(best.values(), key=lambda m: (-m.strength, m.table, m.column))

    def _allowed(self, column_id: int, readable: Readable | None) -> bool:
        if readable is None:
            return True
        column = self._columns[column_id]
        return readable(column.table, column.column)


def _is_text(type_text: str) -> bool:
    upper = type_text.upper()
    return any(kind in upper for kind in _TEXT_TYPES)


def _distinct(found: Iterable[object], max_chars: int, per_column: int) -> tuple[str, ...] | None:
    """The distinct label-like values, or None when the column has more than ``per_column``."""
    distinct: set[str] = set()
    seen: dict[str, None] = {}
    for raw in found:
        if raw is None:
            continue
        value = str(raw)
        distinct.add(value)
        if len(distinct) > per_column:
            return None
        if _kept(value, max_chars):
            seen.setdefault(value, None)
    return tuple(seen)


@contextlib.contextmanager
def _reading(engine: sa.Engine, schema: str | None, limits: ValueLimits) -> Iterator[ValueReader]:
    """Distinct values of one column among its first ``rows_read`` rows, one bounded query each,
    on one connection."""
    # PostgreSQL aborts the transaction on an error, so each read gets a savepoint there
    # (DuckDB has none, and SQLite and MySQL carry on after a failed SELECT).
    guarded = engine.dialect.name == "postgresql"
    quote = engine.dialect.identifier_preparer.quote
    prefix = f"{quote(schema)}." if schema else ""
    with engine.connect() as conn:

        def read(table: str, column: str, at_most: int) -> list[str]:
            # identifiers quoted by the dialect, numbers from the limits: plain text is fastest
            name = quote(column)
            sql = (
                f"SELECT DISTINCT v FROM (SELECT {name} AS v FROM {prefix}{quote(table)} "
                f"WHERE {name} IS NOT NULL LIMIT {int(limits.rows_read)}) AS sampled "
                f"LIMIT {int(at_most) + 1}"
            )
            try:
                with conn.begin_nested() if guarded else contextlib.nullcontext():
                    return [str(v) for (v,) in conn.exec_driver_sql(sql).all()]
            except sa.exc.SQLAlchemyError:
                return []  # a column that cannot be read is left out

        yield read
