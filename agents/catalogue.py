"""The reasoning step's catalogue for big databases: the tables the questions most likely need.

A small schema is shown whole, one line per table. Above ``LARGE_SCHEMA_TABLES`` tables each
question's best-ranked tables (``agents.linking.SchemaIndex``) are shown with their columns, the
join tables on a path between them come along, and one line names more tables without their
columns (the shown ones' foreign-key neighbours, the tables two keys from the best ones, then the
next-ranked); every other table is only counted, and the closing line says what is true of them
(``agents.linking.claims``), so the model knows what it was not shown and that it may still plan
with any table. The values a question names (``agents.linking.ValueIndex``) count for the tables
holding them, and a line tells the planner which column holds which value. When nothing in a question
matches the schema, the names line is a map of the schema (the most connected table of each of
its parts) instead of the same few hubs for every such question. How many tables are shown
follows the ranking's confidence: a clear gap after the best tables shows few and names more;
flat scores show more candidates, the lower-ranked by their keys and the columns the question
reaches. A hint the asker gave with a question is ranked with it.

``build_catalogue`` returns a ``Catalogue`` (the text, the tables shown and their scores, the
names line, the values found, the ranking time); ``compact_catalogue`` and ``batch_catalogue``
give its text.

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

from agents.linking import SchemaIndex, Synonyms, Usage, ValueIndex, ValueMatch
from agents.linking.claims import closing_facts, closing_line
from agents.linking.terms import identifier_terms, stem
from agents.linking.values import Readable
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

#: Tables shown with their columns per question in a large schema's catalogue, at most (a flat
#: ranking may show ``FLAT_EXTRA_TABLES`` more by their keys, a sharp one at most
#: ``SHARP_MAX_TABLES``). The character budget (``DEFAULT_MAX_CHARS``) usually binds first: on
#: the 875-table merged Spider schema (benchmarks/schema_linking.py) a catalogue shows about 46
#: tables on average and every needed table for 99.7 % of the dev questions, at about 10.8 % of
#: the whole-schema request.
DEFAULT_MAX_TABLES = 60

#: Characters of one question's catalogue at most (table lines, names, values and the closing
#: rule): wide tables cost more, so fewer of them are shown.
DEFAULT_MAX_CHARS = 6_000

#: A catalogue for several questions shows at most this many times one question's tables and
#: characters: questions asked together are mostly about the same tables.
BATCH_FACTOR = 2

#: Tables shown with their columns' types per question, when their score is at least
#: ``CONFIDENT_SHARE`` of the best; the others shown show their column names only.
DEFAULT_FULL_TABLES = 8
CONFIDENT_SHARE = 0.5

#: Tables named without columns at most, besides the ones shown.
DEFAULT_MAX_NAMED = 60

#: Characters of the names line at most (names are grouped by prefix, so about 10 per 100).
DEFAULT_NAMES_CHARS = 800

#: Candidates ranked per question, beyond the ones shown: the names line is filled from them.
CANDIDATES = 120

#: Values named in a question that the catalogue tells the planner about, at most.
MAX_VALUES_SHOWN = 6

#: The names line starts with this, so a reader (and a test) can tell a pruned catalogue.
NAMES_LINE_PREFIX = "-- {count} more tables, columns not shown: "
#: The names line of a question that matches nothing: a map of the schema's parts.
OVERVIEW_LINE_PREFIX = (
    "-- nothing in the question matches a table; {count} tables, one per part of the schema: "
)
#: The values line tells the planner where a value the question names is stored.
VALUES_LINE_PREFIX = "-- values named in the question: "
#: The strongest closing line (``agents.linking.claims.closing_line`` writes it only when it is
#: true); its length is what the budget sets aside for the closing line.
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
        description="Tables named without columns: the next-ranked, then the shown ones' "
        "foreign-key neighbours (or, when nothing matched, one table per part of the schema)"
    )
    values: list[str] = Field(
        default_factory=list,
        description="Values the questions name, each as 'value' -> table.column",
    )
    unlisted: int = Field(description="Tables neither shown nor named, only counted")
    ranking_ms: float = Field(description="Time spent ranking and writing the catalogue, in ms")


_INDEX_CACHE_SIZE = 8
_IndexKey = tuple[int, int, int]
_indexes: OrderedDict[
    _IndexKey, tuple[Mapping[str, TableInfo], object, tuple[int, ...], SchemaIndex]
] = OrderedDict()
_indexes_lock = threading.Lock()


def index_for(
    tables: Mapping[str, TableInfo],
    synonyms: Synonyms | None = None,
    usage: Usage | None = None,
) -> SchemaIndex:
    """The ``SchemaIndex`` of ``tables`` (with ``synonyms`` and ``usage``), reused while they
    stay the same.

    ``SchemaExplorer.tables()`` hands out one cached mapping per database, so each schema is
    indexed once however many questions are ranked against it. ``synonyms=None`` means
    ``agents.linking.DEFAULT_SYNONYMS``; a ``Synonyms`` value is matched by identity (build it
    once), a ``Usage`` by what it holds (a new note or reviewed question builds a new index).
    """
    said = usage.fingerprint() if usage else ()
    key = (id(tables), id(synonyms), hash(said))
    fingerprint = tuple(map(id, tables.values()))
    with _indexes_lock:
        cached = _indexes.get(key)
        if (
            cached is not None
            and cached[0] is tables
            and cached[1] == (synonyms, said)
            and cached[2] == fingerprint
        ):
            _indexes.move_to_end(key)
            return cached[3]
    index = SchemaIndex(tables, synonyms=synonyms, usage=usage)
    with _indexes_lock:
        _indexes[key] = (tables, (synonyms, said), fingerprint, index)
        while len(_indexes) > _INDEX_CACHE_SIZE:
            _indexes.popitem(last=False)
    return index


def rank_tables(
    question: str,
    tables: Mapping[str, TableInfo],
    *,
    limit: int | None = None,
    index: SchemaIndex | None = None,
    values: ValueIndex | None = None,
    readable: Readable | None = None,
) -> list[str]:
    """The tables ``question`` is most likely about, best first, at most ``limit``.

    Only tables that match the question (its words, or values it names) or join one that does
    are ranked; when none does, a map of the schema stands in (one table per part), never an
    alphabetical filler.
    """
    ranked = index or index_for(tables)
    matches = values.matches(question, readable) if values is not None else []
    found = ranked.rank(question, limit, matches=matches)
    return found if found else ranked.overview(len(tables) if limit is None else limit)


def build_catalogue(
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    max_named: int = DEFAULT_MAX_NAMED,
    max_chars: int = DEFAULT_MAX_CHARS,
    names_chars: int = DEFAULT_NAMES_CHARS,
    full_tables: int = DEFAULT_FULL_TABLES,
    always_include_all_below: int = LARGE_SCHEMA_TABLES,
    index: SchemaIndex | None = None,
    values: ValueIndex | None = None,
    readable: Readable | None = None,
    hints: Sequence[str] = (),
    clock: Callable[[], float] = time.perf_counter,
) -> Catalogue:
    """The catalogue for a reasoning call that plans ``questions`` (one or several).

    With at most ``always_include_all_below`` tables the text is byte-identical to
    ``SchemaExplorer.catalogue()``. Above that, each question's ``max_tables`` best tables are
    shown (merged in turn: each question's best, then each one's second, ...), with the join
    tables on a path between its best ones, while their lines stay within ``max_chars``
    (``BATCH_FACTOR`` times the tables and characters for several questions; the best table
    always); then one line names at most ``max_named`` more tables within ``names_chars``
    (the next-ranked first, then the shown ones' foreign-key neighbours, most links first), then
    one line counts the rest and states that a plan may still name them. ``values`` finds the
    values the questions name (only in columns ``readable`` allows), which count for their
    tables and are listed for the planner. ``hints`` (one per question, in order; a missing or
    empty one is none) are what the user added to a question ("female refers to gender =
    'F'"): their words and the values they name are ranked with the question's, as if the
    question had said them, and the closing line speaks of both.
    """
    started = clock()
    questions = [
        f"{question} {hint}".strip() if hint and hint.strip() else question
        for question, hint in zip_longest(questions, hints[: len(questions)], fillvalue="")
    ]
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
    per_question: list[list[str]] = []
    rest: list[list[str]] = []
    found_values: list[ValueMatch] = []
    unmatched = weak = 0
    sharp: list[bool] = []  # per question: a clear gap after its best tables
    for question in questions:
        matches = values.matches(question, readable) if values is not None else []
        if values is not None and values.wide:
            # what no table, column or indexed value covers may be in a column too large to
            # index: looked up in the database, under the policy and a time budget
            matches = matches + values.search(question, readable, known=_covered(ranked, matches))
        found_values.extend(m for m in matches if m.whole)
        best = ranked.scored(question, max(max_tables, 0) + CANDIDATES, matches=matches)
        if not best:
            unmatched += 1
        elif not ranked.confident(question, matches=matches):
            weak += 1
        names = [name for name, _ in best]
        sharp.append(_sharp(best))
        head = names[: max(max_tables, 0) + (0 if sharp[-1] else FLAT_EXTRA_TABLES)]
        bridges = [b for b in ranked.bridges(head[:_BRIDGED]) if b not in head[:_BRIDGED]]
        head = _with_bridges(head, bridges)
        per_question.append(head)
        rest.append([n for n in names if n not in head])
        for name, score in best:
            scores[name] = max(scores.get(name, 0.0), score)
    factor = 1 if len(questions) <= 1 else BATCH_FACTOR
    wanted = {term for question in questions for term in ranked.question_terms(question)}
    unlisted_line = len(UNLISTED_RULE) + 8
    told = _values_told(found_values, set(scores))
    told_line = len(VALUES_LINE_PREFIX) + sum(len(_told(m)) + 2 for m in told) if told else 0
    whole_budget = max_chars * factor - told_line - unlisted_line
    cap, budget = max_tables * factor, whole_budget - names_chars * factor
    full = _confident(per_question, scores, full_tables * factor)
    # the budget follows the ranking's confidence: a clear gap after the best tables shows
    # fewer tables (the rest are named), flat scores spread it over more candidates, the
    # lower-ranked ones by their keys and the columns the question's words reach
    if all(sharp):
        cap = min(cap, SHARP_MAX_TABLES * factor)
    else:
        cap += FLAT_EXTRA_TABLES * factor
        budget += max(names_chars - FLAT_NAMES_CHARS, 0) * factor
    whole_rows = SHARP_WHOLE_ROWS if all(sharp) else FLAT_WHOLE_ROWS  # ranks shown whole
    shown: dict[str, None] = {}
    keyed: set[str] = set()
    used = 0
    for position, row in enumerate(zip_longest(*per_question)):
        for name in row:
            if name is None or name in shown or len(shown) >= cap:
                continue
            brief = position >= whole_rows and name not in full
            line = _line(tables[name], name in full, wanted, keyed=brief)
            cost = len(line) + 1
            if shown and used + cost > budget:
                continue
            shown[name] = None
            if brief:
                keyed.add(name)
            used += cost
    neighbours = _neighbour_names(ranked, list(shown), len(tables))
    # and two foreign keys from each question's best tables: the far end of a join path
    seeds = [name for head in per_question for name in head[:_TWO_HOP_SEEDS] if name in shown]
    near_set = set(neighbours) | set(shown)
    neighbours += [n for n in _neighbour_names(ranked, neighbours_of(ranked, seeds), len(tables))
                   if n not in near_set]  # fmt: skip
    ranked_rest = [n for row in zip_longest(*rest) for n in row if n is not None]
    # the shown tables' foreign-key neighbours first: a plan joins them more often than it
    # needs a lower-ranked look-alike, and the closing line can then say none was left out
    candidates = neighbours + ranked_rest
    if unmatched == len(questions):
        candidates = ranked.overview(max_named * factor)
    elif weak == len(questions):
        # only short forms or shared first letters matched: a guess, so a map of the schema
        # comes along, and the closing line says which words match nothing
        candidates = candidates + ranked.overview(max_named * factor)
    named = _fit_names(candidates, set(shown), max_named * factor, whole_budget - used)
    parts = [_line(tables[name], name in full, wanted, keyed=name in keyed) for name in shown]
    listed = set(shown) | set(named)
    told_lines = [_told(m) for m in told if m.table in listed]
    near = set(_neighbour_names(ranked, list(shown), len(tables)))

    def closing(named_now: list[str]) -> str:
        if len(tables) - len(shown) - len(named_now) <= 0:
            return ""
        facts = closing_facts(
            questions, tables, list(shown), named_now, postings=ranked.word_postings,
            neighbours=near,
        )  # fmt: skip
        return closing_line(facts)

    def names_line(named_now: list[str]) -> list[str]:
        if not named_now:
            return []
        prefix = OVERVIEW_LINE_PREFIX if unmatched == len(questions) else NAMES_LINE_PREFIX
        return [prefix.format(count=len(named_now)) + _grouped_names(named_now)]

    values_part = [VALUES_LINE_PREFIX + "; ".join(told_lines)] if told_lines else []
    last = closing(named)
    text = "\n".join([*parts, *names_line(named), *values_part, *([last] if last else [])])
    # the closing line's length depends on what it has to say: names give way to it
    while named and len(text) > max_chars * factor:
        named = named[: max(len(named) - max(len(named) // 8, 1), 0)]
        last = closing(named)
        text = "\n".join([*parts, *names_line(named), *values_part, *([last] if last else [])])
    unlisted = len(tables) - len(shown) - len(named)
    return Catalogue(
        text=text,
        whole_schema=False,
        shown=list(shown),
        scores={name: round(scores.get(name, 0.0), 4) for name in shown},
        named=named,
        values=told_lines,
        unlisted=unlisted,
        ranking_ms=(clock() - started) * 1000.0,
    )


def _covered(index: SchemaIndex, matches: Sequence[ValueMatch]) -> Callable[[str], bool]:
    """Whether a question's word is covered: a schema word, or part of a value already found."""
    found = {word for m in matches if m.whole for word in m.phrase.split()}

    def covered(word: str) -> bool:
        return word in found or stem(word) in index.vocabulary

    return covered


#: The best tables of a question between which join tables are looked for.
_BRIDGED = 4
#: The best tables of a question whose tables two foreign keys away are named.
_TWO_HOP_SEEDS = 2

#: A table with more columns than this is shown with its keys, the columns the question's words
#: reach and its first few others, then a count of the rest (Batch 2 sees the planned tables
#: whole).
WIDE_TABLE_COLUMNS = 14
#: Columns of a wide table shown besides its keys and the columns the question names.
WIDE_TABLE_KEPT = 6
#: A wide table is shown whole unless at least this many of its columns would be left out.
WIDE_TABLE_HIDDEN_MIN = 4

#: The budget follows the ranking's confidence (tuned on Spider train's and text2sql-data's
#: tuning parts, benchmarks/schema_linking.py). A ranking is *sharp* when the table
#: ``SHARP_RANK`` places below the best scores under ``SHARP_SHARE`` of it: then at most
#: ``SHARP_MAX_TABLES`` tables are shown and the rest of the budget names more. Otherwise it is
#: *flat*: ``FLAT_EXTRA_TABLES`` more candidates may be shown, all but the first
#: ``FLAT_WHOLE_ROWS`` of each question by their keys and the columns the question's words reach.
SHARP_RANK = 8
SHARP_SHARE = 0.2
SHARP_MAX_TABLES = 40
SHARP_WHOLE_ROWS = DEFAULT_MAX_TABLES
FLAT_WHOLE_ROWS = 8
FLAT_EXTRA_TABLES = 90
#: Characters set aside for the names line at least when the ranking is flat (the rest of
#: ``names_chars`` goes to the tables shown; names still take what the shown ones leave).
FLAT_NAMES_CHARS = 600
#: A keyed line is used only for a table with more columns than this, hiding at least
#: ``KEYED_HIDDEN_MIN`` of them.
KEYED_TABLE_COLUMNS = 2
KEYED_HIDDEN_MIN = 1


def neighbours_of(index: SchemaIndex, names: Sequence[str]) -> list[str]:
    """The tables one foreign key from any of ``names`` (not ``names`` themselves), in order."""
    inside = set(names)
    out: dict[str, None] = {}
    for name in names:
        for other in index.neighbours(name):
            if other not in inside:
                out[other] = None
    return list(out)


def _line(info: TableInfo, typed: bool, wanted: set[str], *, keyed: bool = False) -> str:
    """A table's catalogue line: with its columns' types when ``typed``; a wide table keeps
    its keys, the columns whose words are in ``wanted`` and its first few others, then says how
    many more it has. ``keyed`` (a lower-ranked table of a catalogue whose ranking is unsure)
    keeps only the keys and the columns whose words are in ``wanted``, then the count."""
    columns = info.columns
    if len(columns) <= (KEYED_TABLE_COLUMNS if keyed else WIDE_TABLE_COLUMNS):
        return info.catalogue_line() if typed else info.compact_line()
    keys = set(info.primary_key) | {c for fk in info.foreign_keys for c in fk.columns}
    named = [
        c.name
        for c in columns
        if c.name in keys or c.primary_key or wanted.intersection(identifier_terms(c.name))
    ]
    others = [c.name for c in columns if c.name not in named][: 0 if keyed else WIDE_TABLE_KEPT]
    kept = set(named) | set(others)
    if len(columns) - len(kept) < (KEYED_HIDDEN_MIN if keyed else WIDE_TABLE_HIDDEN_MIN):
        return info.catalogue_line() if typed else info.compact_line()  # hiding few saves nothing
    shown = [c for c in columns if c.name in kept]
    text = ", ".join(f"{c.name} {c.type}".rstrip() if typed else c.name for c in shown)
    return f"{info.name}({text}, ... {len(columns) - len(shown)} more columns)"


def _sharp(best: list[tuple[str, float]]) -> bool:
    """True when a question's ranking has a clear gap: the table ``SHARP_RANK`` places down
    scores under ``SHARP_SHARE`` of the best."""
    if len(best) <= SHARP_RANK:
        return True
    top = best[0][1]
    return top > 0 and best[SHARP_RANK][1] < SHARP_SHARE * top


def _confident(per_question: list[list[str]], scores: dict[str, float], limit: int) -> set[str]:
    """The tables shown with their column types: each question's best ones, while their score
    is near its best (a clear winner keeps the types of few; flat scores of none beyond the
    first few)."""
    chosen: set[str] = set()
    for names in per_question:
        if not names:
            continue
        top = scores.get(names[0], 0.0)
        for name in names[:limit]:
            if scores.get(name, 0.0) >= CONFIDENT_SHARE * top:
                chosen.add(name)
    return chosen


def _with_bridges(head: list[str], bridges: list[str]) -> list[str]:
    """The join tables go right after the tables they join, ahead of weaker candidates."""
    if not bridges:
        return head
    top = head[:_BRIDGED]
    return top + bridges + [n for n in head[_BRIDGED:] if n not in bridges]


def _fit_names(candidates: list[str], shown: set[str], limit: int, chars: int) -> list[str]:
    """The first ``candidates`` not shown, at most ``limit`` and within ``chars``."""
    named: list[str] = []
    seen = set(shown)
    used = 0
    for name in candidates:
        if name in seen:
            continue
        seen.add(name)
        cost = len(name) + 2
        if len(named) >= limit or used + cost > chars:
            break
        named.append(name)
        used += cost
    return named


def _values_told(matches: list[ValueMatch], listed: set[str]) -> list[ValueMatch]:
    """The strongest whole values found in ``listed`` tables, one per table and column."""
    told: dict[tuple[str, str, str], ValueMatch] = {}
    for match in sorted(matches, key=lambda m: -m.strength):
        key = (match.table, match.column, match.value)
        if match.table in listed and key not in told:
            told[key] = match
        if len(told) >= MAX_VALUES_SHOWN:
            break
    return list(told.values())


def _told(match: ValueMatch) -> str:
    """``'value' -> table.column``, the value quoted as a SQL string on one line."""
    value = " ".join(match.value.split()).replace("'", "''")
    return f"'{value}' -> {match.table}.{match.column}"


def compact_catalogue(
    question: str,
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    always_include_all_below: int = LARGE_SCHEMA_TABLES,
    index: SchemaIndex | None = None,
    values: ValueIndex | None = None,
) -> str:
    """The catalogue text for one question (``build_catalogue([question], ...).text``)."""
    return build_catalogue(
        [question],
        tables,
        max_tables=max_tables,
        always_include_all_below=always_include_all_below,
        index=index,
        values=values,
    ).text


def batch_catalogue(
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    always_include_all_below: int = LARGE_SCHEMA_TABLES,
    index: SchemaIndex | None = None,
    values: ValueIndex | None = None,
) -> str:
    """The catalogue text for several questions planned in one call (see ``build_catalogue``)."""
    return build_catalogue(
        questions,
        tables,
        max_tables=max_tables,
        always_include_all_below=always_include_all_below,
        index=index,
        values=values,
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
