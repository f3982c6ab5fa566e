"""The reasoning step's catalogue for big databases: the tables the questions most likely need.

A small schema is shown whole, one line per table. Above ``LARGE_SCHEMA_TABLES`` tables each
question's best-ranked tables (``agents.linking.SchemaIndex``) are shown with their columns, and
one line names the tables joined to them by a foreign key; every other table is only counted, and
the text says so, so the model knows it may still plan with a table it was not shown.
``build_catalogue`` returns a ``Catalogue`` (the text, the tables shown and their scores, the
names line, the ranking time); ``compact_catalogue`` and ``batch_catalogue`` give its text.

Example:
    >>> from agents.schema_explorer import ColumnInfo, TableInfo
    >>> def table(name, *cols):
    ...     return TableInfo(name=name, columns=[ColumnInfo(name=c, type="INTEGER") for c in cols])
    >>> schema = {t.name: t for t in (table("comet", "comet_id", "discovered_on"),
    ...                               table("planet", "planet_id", "orbit_days"))}
    >>> rank_tables("When was each comet discovered?", schema, limit=1)
    ['comet']
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import zip_longest

from pydantic import BaseModel, Field

from agents.linking import SchemaIndex, Synonyms
from agents.schema_explorer import TableInfo

__all__ = [
    "BATCH_FACTOR",
    "Catalogue",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_NAMED",
    "DEFAULT_MAX_TABLES",
    "LARGE_SCHEMA_TABLES",
    "SchemaIndex",
    "batch_catalogue",
    "build_catalogue",
    "compact_catalogue",
    "index_for",
    "rank_tables",
]

#: Above this many tables the catalogue is ranked and pruned (Batch 1), and Batch 2 sees only the
#: planned tables and what they refer to. At or below it, the whole schema goes in every prompt.
LARGE_SCHEMA_TABLES = 40

#: Tables shown with their columns per question in a large schema's catalogue. Measured by
#: benchmarks/schema_linking.py on 875 merged public tables: 30 keeps every needed table shown for
#: about 97 % of questions while the request stays near a tenth of the whole-schema request.
DEFAULT_MAX_TABLES = 30

#: Characters of table lines at most in one question's catalogue: wide tables cost more, so
#: fewer of them are shown (on the 300-table test schema, about 26 of 30).
DEFAULT_MAX_CHARS = 6_000

#: A catalogue for several questions shows at most this many times one question's tables and
#: characters: questions asked together are mostly about the same tables.
BATCH_FACTOR = 2

#: Tables named without columns at most, besides the ones shown (their foreign-key neighbours).
DEFAULT_MAX_NAMED = 40

#: The names line starts with this, so a reader (and a test) can tell a pruned catalogue.
NAMES_LINE_PREFIX = "-- {count} more tables, columns not shown: "
#: The rule stated under a pruned catalogue, so the model knows what else it may plan with.
UNLISTED_RULE = (
    "-- {count} other tables are not listed: none shares a foreign key with the tables above or "
    "matches the question's words; a plan may still name any table of the database."
)


class Catalogue(BaseModel):
    """The catalogue one reasoning call sees, and what went into it."""

    text: str = Field(description="The catalogue as it goes into the prompt")
    whole_schema: bool = Field(description="True when every table is shown with its columns")
    shown: list[str] = Field(description="Tables shown with their columns, in prompt order")
    scores: dict[str, float] = Field(
        description="Ranking score of each shown table (the best over the questions)"
    )
    named: list[str] = Field(
        description="Tables named without columns: foreign-key neighbours of the shown ones"
    )
    unlisted: int = Field(description="Tables neither shown nor named, only counted")
    ranking_ms: float = Field(description="Time spent ranking and writing the catalogue, in ms")


_INDEX_CACHE_SIZE = 8
_IndexKey = tuple[int, int]
_indexes: OrderedDict[
    _IndexKey, tuple[Mapping[str, TableInfo], Synonyms | None, tuple[int, ...], SchemaIndex]
] = OrderedDict()
_indexes_lock = threading.Lock()


def index_for(tables: Mapping[str, TableInfo], synonyms: Synonyms | None = None) -> SchemaIndex:
    """The ``SchemaIndex`` of ``tables`` (with ``synonyms``), reused while both stay the same.

    ``SchemaExplorer.tables()`` hands out one cached mapping per database, so each schema is
    indexed once however many questions are ranked against it. ``synonyms=None`` means
    ``agents.linking.DEFAULT_SYNONYMS``; a ``Synonyms`` value is matched by identity, so build it
    once (``DEFAULT_SYNONYMS | Synonyms.load(path)``) and pass the same object every time.
    """
    key = (id(tables), id(synonyms))
    fingerprint = tuple(map(id, tables.values()))
    with _indexes_lock:
        cached = _indexes.get(key)
        if (
            cached is not None
            and cached[0] is tables
            and cached[1] is synonyms
            and cached[2] == fingerprint
        ):
            _indexes.move_to_end(key)
            return cached[3]
    index = SchemaIndex(tables, synonyms=synonyms)
    with _indexes_lock:
        _indexes[key] = (tables, synonyms, fingerprint, index)
        while len(_indexes) > _INDEX_CACHE_SIZE:
            _indexes.popitem(last=False)
    return index


def rank_tables(
    question: str,
    tables: Mapping[str, TableInfo],
    *,
    limit: int | None = None,
    index: SchemaIndex | None = None,
) -> list[str]:
    """The tables ``question`` is most likely about, best first, at most ``limit``.

    Only tables that match the question or join one that does are ranked; when none does, the
    most connected tables stand in (never an alphabetical filler).
    """
    ranked = index or index_for(tables)
    found = ranked.rank(question, limit)
    return found if found else ranked.hubs(len(tables) if limit is None else limit)


def build_catalogue(
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_named: int = DEFAULT_MAX_NAMED,
    max_chars: int = DEFAULT_MAX_CHARS,
    always_include_all_below: int = LARGE_SCHEMA_TABLES,
    index: SchemaIndex | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Catalogue:
    """The catalogue for a reasoning call that plans ``questions`` (one or several).

    With at most ``always_include_all_below`` tables the text is byte-identical to
    ``SchemaExplorer.catalogue()``. Above that, each question's ``max_tables`` best tables are
    shown (merged in turn: each question's best, then each one's second, ...) while their lines
    stay within ``max_chars`` (``BATCH_FACTOR`` times the tables and characters for several
    questions; the best table always), then one line
    names at most ``max_named`` tables one foreign key from the shown ones (most links first),
    then one line counts the rest and states that a plan may still name them.
    """
    started = clock()
    if len(tables) <= always_include_all_below:
        return Catalogue(
            text=_lines(tables.values()),
            whole_schema=True,
            shown=list(tables),
            scores={},
            named=[],
            unlisted=0,
            ranking_ms=(clock() - started) * 1000.0,
        )
    ranked = index or index_for(tables)
    scores: dict[str, float] = {}
    per_question = []
    for question in questions:
        best = ranked.scored(question, max(max_tables, 0))
        if not best:
            best = [(name, 0.0) for name in ranked.hubs(max_tables)]
        per_question.append([name for name, _ in best])
        for name, score in best:
            scores[name] = max(scores.get(name, 0.0), score)
    factor = 1 if len(questions) <= 1 else BATCH_FACTOR
    cap, budget = max_tables * factor, max_chars * factor
    shown: dict[str, None] = {}
    used = 0
    for row in zip_longest(*per_question):
        for name in row:
            if name is None or name in shown or len(shown) >= cap:
                continue
            cost = len(tables[name].catalogue_line()) + 1
            if shown and used + cost > budget:
                continue
            shown[name] = None
            used += cost
    named = _neighbour_names(ranked, list(shown), max_named)
    unlisted = len(tables) - len(shown) - len(named)
    text = _lines(tables[name] for name in shown)
    if named:
        text += "\n" + NAMES_LINE_PREFIX.format(count=len(named)) + _grouped_names(named)
    if unlisted:
        text += "\n" + UNLISTED_RULE.format(count=unlisted)
    return Catalogue(
        text=text,
        whole_schema=False,
        shown=list(shown),
        scores={name: round(scores[name], 4) for name in shown},
        named=named,
        unlisted=unlisted,
        ranking_ms=(clock() - started) * 1000.0,
    )


def compact_catalogue(
    question: str,
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    always_include_all_below: int = LARGE_SCHEMA_TABLES,
    index: SchemaIndex | None = None,
) -> str:
    """The catalogue text for one question (``build_catalogue([question], ...).text``)."""
    return build_catalogue(
        [question],
        tables,
        max_tables=max_tables,
        always_include_all_below=always_include_all_below,
        index=index,
    ).text


def batch_catalogue(
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    always_include_all_below: int = LARGE_SCHEMA_TABLES,
    index: SchemaIndex | None = None,
) -> str:
    """The catalogue text for several questions planned in one call (see ``build_catalogue``)."""
    return build_catalogue(
        questions,
        tables,
        max_tables=max_tables,
        always_include_all_below=always_include_all_below,
        index=index,
    ).text


def _neighbour_names(index: SchemaIndex, shown: list[str], limit: int) -> list[str]:
    """Tables one foreign key from ``shown``, most links to the shown ones first."""
    chosen = set(shown)
    links: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for name in shown:
        for other in index.neighbours(name):
            if other not in chosen:
                links[other] = links.get(other, 0) + 1
                first_seen.setdefault(other, len(first_seen))
    order = sorted(links, key=lambda n: (-links[n], first_seen[n]))
    return order[: max(limit, 0)]


def _grouped_names(names: list[str]) -> str:
    """Table names with a shared prefix written once: ``hive_{harvest,inspection}, apiary``.

    Example:
        >>> _grouped_names(["hive_harvest", "hive_inspection", "apiary", "keeper_visit"])
        'hive_{harvest,inspection}, apiary, keeper_visit'
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        prefix, sep, rest = name.partition("_")
        key = prefix + sep if sep and rest else name
        groups.setdefault(key, []).append(rest if sep and rest else "")
    parts = []
    for key, tails in groups.items():
        if len(tails) > 1 and all(tails):
            parts.append(f"{key}{{{','.join(tails)}}}")
        else:
            parts.extend(key + tail for tail in tails)
    return ", ".join(parts)


def _lines(tables: Iterable[TableInfo]) -> str:
    return "\n".join(t.catalogue_line() for t in tables)
