"""Vocabulary learned from the schema and from how it was used, never listed by hand.

Two sources, both per database:

- **the schema itself**: an abbreviated identifier whose comment spells out what it means
  (column ``disp_id`` commented "disposition", table ``trans`` commented "transactions")
  teaches that the short word stands for the long one, and every other table using the short
  word (``disp``, ``trans``) answers to the long one too (``learned_expansions``);
- **usage**: a business note names tables and says what they hold in the analysts' words
  ("Borrowers are the clients with a loan" for ``client`` and ``loan``), and a reviewed
  question was answered from the tables its SQL read ("How many deals closed last month?" from
  ``trans``). ``Usage`` keeps those texts per table; the index reads their words as evidence
  for the tables they were said about.

Example:
    >>> from agents.schema_explorer import ColumnInfo, TableInfo
    >>> tables = {"disp": TableInfo(name="disp", comment="dispositions of clients to accounts"),
    ...           "card": TableInfo(name="card", columns=[ColumnInfo(name="disp_id", type="INT")])}
    >>> learned_expansions(tables)
    {'disp': ['disposit']}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from agents.linking.derivation import abbreviates
from agents.linking.terms import STOPWORDS, stem, words
from agents.schema_explorer import TableInfo

__all__ = ["ShortForms", "Usage", "learned_expansions", "short_forms"]

#: An identifier word this long or shorter may be an abbreviation.
ABBREVIATION_MAX_CHARS = 6
#: A short word used in at least this many different multi-word identifiers is a naming pattern
#: of the schema (``cust_id``, ``cust_name``), so it may stand for a question's longer word.
PATTERN_MIN_IDENTIFIERS = 2


class ShortForms:
    """Which short identifier words may stand for a question's longer word, and for which.

    A short word (3 to ``ABBREVIATION_MAX_CHARS`` letters) may stand for a longer one only with
    support from the schema:

    - ``spelled``: a longer word of its own table or of a table one foreign key away that it
      abbreviates (``apt_id`` in ``Apartments``, ``sec_id`` beside ``section``): it stands for
      those words only, so "alphabetical" never reaches ``apt`` nor "second" ``sec``;
    - ``patterned``: no such word, but the schema writes it in several multi-word identifiers
      (``cust_id``, ``cust_name``): a naming pattern, so it may stand for a question word it
      abbreviates, below a whole word.

    A short word with neither (a lone ``Str`` or ``Mar`` column) stands only for itself;
    comments (``learned_expansions``), synonyms and reviewed questions reach it their own way.
    """

    def __init__(self, spelled: dict[str, set[str]], patterned: set[str]) -> None:
        self.spelled = spelled
        self.patterned = frozenset(patterned)


def short_forms(tables: Mapping[str, TableInfo]) -> ShortForms:
    """The supported short forms of ``tables`` (see ``ShortForms``)."""
    own: dict[str, set[str]] = {}  # table -> its identifier words (unstemmed)
    shorts: dict[str, set[str]] = {}  # short word -> the tables using it
    uses: dict[str, set[str]] = {}  # short word -> multi-word identifiers having it
    for name, info in tables.items():
        found = own.setdefault(name, set())
        texts = [info.name, *(c.name for c in info.columns)]
        if info.comment:
            texts.append(info.comment)
        for text in texts:
            parts = [w for w in words(text) if w.isalpha()]
            found.update(parts)
            for part in parts:
                if 3 <= len(part) <= ABBREVIATION_MAX_CHARS:
                    shorts.setdefault(part, set()).add(name)
                    if len(parts) > 1:
                        uses.setdefault(part, set()).add(text.lower())
    near: dict[str, set[str]] = {name: {name} for name in tables}
    for name, info in tables.items():
        for fk in info.foreign_keys:
            if fk.referred_table in near:
                near[name].add(fk.referred_table)
                near[fk.referred_table].add(name)
    spelled: dict[str, set[str]] = {}
    patterned: set[str] = set()
    for short, users in shorts.items():
        longer = {
            stem(word)
            for user in users
            for other in near[user]
            for word in own[other]
            if word != short and stem(word) != stem(short) and abbreviates(short, word)
        }
        if longer:
            spelled[short] = longer
        elif len(uses.get(short, ())) >= PATTERN_MIN_IDENTIFIERS:
            patterned.add(short)
    return ShortForms(spelled, patterned)


def learned_expansions(tables: Mapping[str, TableInfo]) -> dict[str, list[str]]:
    """Short identifier words -> the stems of the words their comments spell them out with."""
    found: dict[str, set[str]] = {}

    def learn(identifier: str, comment: str | None) -> None:
        if not comment:
            return
        spelled = [w for w in words(comment) if w not in STOPWORDS and len(w) > 3]
        for short in words(identifier):
            if len(short) > ABBREVIATION_MAX_CHARS or not short.isalpha():
                continue
            for word in spelled:
                if abbreviates(short, word) and stem(word) != stem(short):
                    found.setdefault(short, set()).add(stem(word))

    for info in tables.values():
        learn(info.name, info.comment)
        for column in info.columns:
            learn(column.name, column.comment)
    return {short: sorted(stems) for short, stems in sorted(found.items())}


class Usage:
    """What people said about tables: business notes and reviewed questions, per table.

    Args:
        texts: table name -> texts said about it (a note's text, a reviewed question).
    """

    def __init__(self, texts: Mapping[str, Iterable[str]] | None = None) -> None:
        self._texts: dict[str, list[str]] = {}
        for table, said in (texts or {}).items():
            self.add(table, said)

    def add(self, table: str, texts: Iterable[str]) -> None:
        self._texts.setdefault(table, []).extend(t for t in texts if t and t.strip())

    def texts(self, table: str) -> Sequence[str]:
        """What was said about ``table`` (matched by exact name, then without regard to case)."""
        return self._texts.get(table) or self._folded().get(table.casefold(), [])

    def _folded(self) -> dict[str, list[str]]:
        return {name.casefold(): texts for name, texts in self._texts.items()}

    def fingerprint(self) -> tuple[tuple[str, int], ...]:
        """Changes when a text is added: the index cache is keyed by it."""
        return tuple(sorted((t, hash(tuple(texts))) for t, texts in self._texts.items()))

    def __len__(self) -> int:
        return sum(len(texts) for texts in self._texts.values())

    def __bool__(self) -> bool:
        return bool(self._texts)
