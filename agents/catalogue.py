"""The reasoning step's catalogue for big databases: the tables a question most likely needs.

A plain lexical ranker, no model and no I/O: table and column names are split into words
(``ar_invoice_lines`` -> ar, invoice, line), reduced by a light stemmer so plurals and verb forms
meet (invoices / invoiced / invoice), widened by a small explicit table of abbreviations and
analysts' synonyms, and weighted by how rare each word is in the schema. A match in a table's
name counts more than one in its columns, and tables one foreign key away from a strong hit get
part of its score, so the join table or look-up a question implies comes along.

``compact_catalogue`` keeps the exact text of ``SchemaExplorer.catalogue()`` for small schemas
and, for big ones, shows the best-ranked tables in full and only the names of the others.

Example:
    >>> from agents.schema_explorer import ColumnInfo, TableInfo
    >>> def table(name, *cols):
    ...     return TableInfo(name=name, columns=[ColumnInfo(name=c, type="INTEGER") for c in cols])
    >>> schema = {t.name: t for t in (table("hr_employees", "employee_id", "hire_date"),
    ...                               table("ar_invoices", "invoice_id", "total_amount"))}
    >>> rank_tables("Total invoiced amount last year", schema, limit=1)
    ['ar_invoices']
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from agents.schema_explorer import TableInfo

__all__ = [
    "CatalogueIndex",
    "DEFAULT_MAX_TABLES",
    "batch_catalogue",
    "compact_catalogue",
    "index_for",
    "rank_tables",
    "stem",
    "words",
]

#: Tables shown with their columns in a big schema's catalogue. Measured on the 300-table ERP
#: schema (benchmarks/prompt_size.py): every gold table of its questions ranks within the top 14,
#: and 14 tables plus the other names keep the catalogue near 14 % of the whole schema's.
DEFAULT_MAX_TABLES = 14

#: Short forms found in schemas, read as the words they stand for.
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "addr": ("address",),
    "amt": ("amount",),
    "ap": ("payable",),
    "ar": ("receivable",),
    "bom": ("bill", "material"),
    "cm": ("cash", "bank"),
    "cust": ("customer",),
    "dept": ("department",),
    "emp": ("employee",),
    "fa": ("fixed", "asset"),
    "gl": ("general", "ledger", "account"),
    "hr": ("human", "resource"),
    "inv": ("inventory",),
    "mfg": ("manufacturing", "production"),
    "no": ("number",),
    "nps": ("net", "promoter", "score"),
    "num": ("number",),
    "pay": ("payroll",),
    "po": ("purchase", "order"),
    "prj": ("project",),
    "pur": ("purchase",),
    "qty": ("quantity",),
    "rfq": ("request", "quotation"),
    "rma": ("return", "authorization"),
    "sls": ("sales",),
    "svc": ("service",),
    "tms": ("transport", "freight"),
    "uom": ("unit", "measure"),
}

#: Analysts' words that name the same thing as a schema's words.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "actual": ("journal", "posted"),
    "bill": ("invoice",),
    "client": ("customer",),
    "cost": ("expense",),
    "dollar": ("currency",),
    "euro": ("currency",),
    "headcount": ("employee",),
    "joined": ("hire",),
    "owe": ("payable", "invoice"),
    "people": ("employee",),
    "product": ("item",),
    "reorder": ("stock",),
    "rep": ("salesperson", "employee"),
    "revenue": ("invoice", "sales"),
    "salespeople": ("salesperson", "employee"),
    "salesperson": ("employee",),
    "sku": ("item",),
    "sell": ("sales", "order"),
    "sold": ("sales", "order"),
    "spend": ("invoice", "purchase"),
    "staff": ("employee",),
    "unpaid": ("payment", "due"),
    "unreconciled": ("reconciled",),
    "vendor": ("supplier",),
    "worker": ("employee",),
}

STOPWORDS = frozenset(
    """
a about above after all also am an and any are as at be been before below between both but by can could did
do does each every for from get give had has have how i if in into is it its last list me more most much my
next no not now of on or our over per please right same show so some still such than that the their them then
there these this those to top under up us was we were what when where which while who whom why will with
without would year years month months day days week quarter today yesterday you your
""".split()
)

NAME_WEIGHT = 3.0  # a word in the table's name
HEAD_WEIGHT = (
    1.5  # extra for the name's last word, the thing a row is (``invoice`` in ar_invoice_lines)
)
COLUMN_WEIGHT = 1.0  # a word in some column's name, counted once per table
SYNONYM_WEIGHT = 0.7  # a question word reached only through SYNONYMS
REFERRED_SHARE = 0.5  # part of a referring table's own score the table it refers to receives
REFERRING_SHARE = 0.25  # part of a referred table's own score a table that refers to it receives
NEIGHBOURS_COUNTED = (
    2  # a table joining two strong hits (a line to its header and item) gains from both
)

_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "es", "ed", "s")


def words(text: str) -> list[str]:
    """Lower-case words and numbers: ``supplierInvoice_no``, ``days_90`` -> supplier, invoice, no; days, 90."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return re.findall(r"[a-z]+|[0-9]+", spaced.lower())


def stem(word: str) -> str:
    """A light stemmer that lets plurals and verb forms meet: invoices, invoiced, invoice -> invoic."""
    if len(word) <= 3 or word.endswith(("ss", "us", "is")):
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    while word.endswith("e") and len(word) > 4:  # employee, employees -> employ
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiousl":
        word = word[:-1]
    return word


def _schema_terms(identifier: str) -> list[str]:
    out = []
    for word in words(identifier):
        out.append(stem(word))
        out.extend(stem(w) for w in ABBREVIATIONS.get(word, ()))
    return out


def _question_terms(question: str) -> dict[str, float]:
    """Stem -> weight: the question's own words at 1, words reached through a synonym lower."""
    terms: dict[str, float] = {}
    for word in words(question):
        if word in STOPWORDS:
            continue
        base = stem(word)
        terms[base] = 1.0
        for other in _SYNONYM_STEMS.get(base, ()):
            terms.setdefault(other, SYNONYM_WEIGHT)
    return terms


def _synonym_stems() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for table in (ABBREVIATIONS, SYNONYMS):
        for word, others in table.items():
            out[stem(word)] = out.get(stem(word), ()) + tuple(stem(o) for o in others)
    return out


_SYNONYM_STEMS = _synonym_stems()


@dataclass(frozen=True)
class _TableTerms:
    name: frozenset[str]
    head: frozenset[str]
    columns: frozenset[str]


class CatalogueIndex:
    """The words of every table, their rarity, and the foreign-key graph, built once per schema.

    ``rank_tables`` and ``compact_catalogue`` reuse one per schema mapping (see ``index_for``).
    """

    def __init__(self, tables: Mapping[str, TableInfo]) -> None:
        self.order = list(tables)
        self.terms: dict[str, _TableTerms] = {}
        for name, info in tables.items():
            name_words = words(name)
            self.terms[name] = _TableTerms(
                name=frozenset(_schema_terms(name)),
                head=frozenset(_schema_terms(name_words[-1])) if name_words else frozenset(),
                columns=frozenset(t for column in info.columns for t in _schema_terms(column.name)),
            )
        frequency: dict[str, int] = {}
        for entry in self.terms.values():
            for term in entry.name | entry.columns:
                frequency[term] = frequency.get(term, 0) + 1
        total = max(len(self.terms), 1)
        self.idf = {term: math.log(1.0 + total / count) for term, count in frequency.items()}
        # neighbours[t][n] is the share of n's score t receives: more from the tables that refer to
        # t (a line table's hit needs its header for the date, a fact its look-ups) than the reverse
        self.neighbours: dict[str, dict[str, float]] = {name: {} for name in tables}
        for name, info in tables.items():
            for fk in info.foreign_keys:
                if fk.referred_table in self.neighbours and fk.referred_table != name:
                    self.neighbours[fk.referred_table][name] = REFERRED_SHARE
                    self.neighbours[name].setdefault(fk.referred_table, REFERRING_SHARE)

    def scores(self, question: str) -> dict[str, float]:
        """Every table's score for ``question``: its own words' match plus a share of its best neighbours'."""
        terms = _question_terms(question)
        own: dict[str, float] = {}
        for name, entry in self.terms.items():
            score = 0.0
            for term, weight in terms.items():
                idf = self.idf.get(term)
                if idf is None:
                    continue
                if term in entry.name:
                    score += (
                        weight * idf * (NAME_WEIGHT + (HEAD_WEIGHT if term in entry.head else 0.0))
                    )
                elif term in entry.columns:
                    score += weight * idf * COLUMN_WEIGHT
            own[name] = score
        boosted = {}
        for name, score in own.items():
            shares = sorted(
                (own[n] * share for n, share in self.neighbours[name].items()), reverse=True
            )
            boosted[name] = score + sum(shares[:NEIGHBOURS_COUNTED])
        return boosted

    def rank(self, question: str, limit: int | None = None) -> list[str]:
        """Table names, best first; ties keep the schema's order, so the result is deterministic."""
        scores = self.scores(question)
        position = {name: i for i, name in enumerate(self.order)}
        ranked = sorted(self.order, key=lambda name: (-scores[name], position[name]))
        return ranked if limit is None else ranked[: max(limit, 0)]


_INDEX_CACHE_SIZE = 8
_indexes: OrderedDict[int, tuple[Mapping[str, TableInfo], tuple[int, ...], CatalogueIndex]] = (
    OrderedDict()
)
_indexes_lock = threading.Lock()


def index_for(tables: Mapping[str, TableInfo]) -> CatalogueIndex:
    """The ``CatalogueIndex`` of ``tables``, reused while the same mapping holds the same tables.

    ``SchemaExplorer.tables()`` hands out one cached mapping per database, so each schema is
    indexed once however many questions are ranked against it.
    """
    fingerprint = tuple(map(id, tables.values()))
    with _indexes_lock:
        cached = _indexes.get(id(tables))
        if cached is not None and cached[0] is tables and cached[1] == fingerprint:
            _indexes.move_to_end(id(tables))
            return cached[2]
    index = CatalogueIndex(tables)
    with _indexes_lock:
        _indexes[id(tables)] = (tables, fingerprint, index)
        while len(_indexes) > _INDEX_CACHE_SIZE:
            _indexes.popitem(last=False)
    return index


def rank_tables(
    question: str, tables: Mapping[str, TableInfo], *, limit: int | None = None
) -> list[str]:
    """The names of ``tables`` ordered by how related they look to ``question``, at most ``limit``."""
    return index_for(tables).rank(question, limit)


def compact_catalogue(
    question: str,
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    always_include_all_below: int = 40,
    index: CatalogueIndex | None = None,
) -> str:
    """The catalogue the reasoning step sees: the whole schema when small, else the best tables.

    With at most ``always_include_all_below`` tables the text is byte-identical to
    ``SchemaExplorer.catalogue()``. Above that, the ``max_tables`` best-ranked tables come one line
    each with their columns, best first, then one line naming every other table, so the plan may
    still name them. ``index`` overrides the cached ``CatalogueIndex`` of ``tables``.
    """
    if len(tables) <= always_include_all_below:
        return _lines(tables.values())
    return _pruned(tables, (index or index_for(tables)).rank(question, max_tables))


def batch_catalogue(
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    *,
    max_tables: int = DEFAULT_MAX_TABLES,
    always_include_all_below: int = 40,
    index: CatalogueIndex | None = None,
) -> str:
    """One catalogue for a reasoning call that plans several questions at once.

    Every question's ``max_tables`` best tables are shown (merged in turn: each question's best,
    then each one's second, ...), then the names of the rest; one question gives exactly
    ``compact_catalogue``'s text, and small schemas the whole catalogue.
    """
    if len(tables) <= always_include_all_below:
        return _lines(tables.values())
    ranked = index or index_for(tables)
    shown: dict[str, None] = {}
    for row in zip_longest(*(ranked.rank(q, max_tables) for q in questions)):
        shown.update((name, None) for name in row if name is not None)
    return _pruned(tables, list(shown))


def _pruned(tables: Mapping[str, TableInfo], shown: list[str]) -> str:
    chosen = set(shown)
    rest = [name for name in tables if name not in chosen]
    text = _lines(tables[name] for name in shown)
    if rest:
        text += f"\n-- {len(rest)} more tables, columns not shown: {_grouped_names(rest)}"
    return text


def _grouped_names(names: list[str]) -> str:
    """Table names with a shared prefix written once: ``ap_{invoices,payments}, orders``.

    Example:
        >>> _grouped_names(["ap_invoices", "ap_payments", "orders", "gl_accounts"])
        'ap_{invoices,payments}, orders, gl_accounts'
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
