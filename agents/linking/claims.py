"""What a pruned catalogue says about the tables it leaves out, and a check that it is true.

A catalogue of a large schema shows some tables, names some more and only counts the rest. Its
closing line tells the planner what the counted tables are not, so the planner can trust that
nothing it needs is hidden, or knows that something may be. Every statement of that line is a
fact computed from the schema, never a guess of the ranker:

- how many of the counted tables share a foreign key with a table shown with its columns;
- how many of them have one of the question's words in their name, a column's name or a
  comment (``table_words``: the same stems the ranker reads, no synonyms or short forms), and
  which words those are;
- which of the question's words no table or column of the whole database has: what they name
  may be anywhere (a person, a title), so no "nothing else matches" is claimed then (words of
  what is done with the data, ``OPERATION_WORDS`` such as "greater" or "sorted", are not
  listed there, and are still counted when a left-out table has them).

``closing_line`` writes the line from ``ClosingFacts``; ``check_closing`` reads a catalogue's
text back, recomputes the facts from the schema alone and returns what is false in it.

Example:
    >>> from agents.schema_explorer import ColumnInfo, TableInfo
    >>> tables = {n: TableInfo(name=n, columns=[ColumnInfo(name=f"{n}_id", type="INT")])
    ...           for n in ("comet", "planet", "glacier")}
    >>> facts = closing_facts(["Which comets are there?"], tables, ["comet"], [])
    >>> for part in closing_line(facts).split(": "): print(part)
    -- 2 other tables are not listed
    none shares a foreign key with the tables above or matches the question's words; a plan may \
still name any table of the database.
    >>> check_closing(closing_line(facts), ["Which comets are there?"], tables, ["comet"], [])
    []
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agents.linking.terms import STOPWORDS, identifier_terms, stem, words
from agents.schema_explorer import TableInfo

__all__ = [
    "ClosingFacts",
    "check_closing",
    "closing_facts",
    "closing_line",
    "table_words",
    "word_postings",
]

#: The closing line starts with this, whatever it goes on to say.
CLOSING_PREFIX = "-- {count} other tables are not listed: "
#: The strongest statement: nothing counted joins the shown tables or has a word of the question.
NOTHING_ELSE = "none shares a foreign key with the tables above or matches the question's words"
#: The names line of a question that matches nothing starts with this (a claim checked too).
OVERVIEW_START = "-- nothing in the question matches a table"
_TAIL = "a plan may still name any table of the database."
#: Words of what a question asks to do with the data (compare, count, sort), not of what it is
#: about: no table needs to have them, so a question using them is not called thin evidence.
OPERATION_WORDS = frozenset(
    """
greater less larger smaller largest smallest biggest highest lowest least fewer more most top
bottom average mean total sum count number maximum minimum max min sort sorted order ordered
ascending descending alphabetical alphabetically different distinct unique each every both
first last equal equals exceed exceeds above below between than times percentage percent
respectively corresponding along whose also ever never
""".split()
)

#: Words listed in a statement at most; more are counted ("and 3 more").
_WORDS_SHOWN = 6


def table_words(info: TableInfo) -> frozenset[str]:
    """The stems of a table's name, its columns' names and its and their comments."""
    found: set[str] = set(identifier_terms(info.name))
    if info.comment:
        found.update(identifier_terms(info.comment))
    for column in info.columns:
        found.update(identifier_terms(column.name))
        if column.comment:
            found.update(identifier_terms(column.comment))
    return frozenset(found)


def word_postings(tables: Mapping[str, TableInfo]) -> dict[str, frozenset[str]]:
    """Stem -> the tables whose ``table_words`` hold it."""
    out: dict[str, set[str]] = {}
    for name, info in tables.items():
        for term in table_words(info):
            out.setdefault(term, set()).add(name)
    return {term: frozenset(names) for term, names in out.items()}


def _question_words(questions: Iterable[str]) -> dict[str, str]:
    """Stem -> the first way the questions spelled it (content words, no numbers)."""
    out: dict[str, str] = {}
    for question in questions:
        for word in words(question):
            if not word.isdigit() and word not in STOPWORDS and len(word) > 1:
                out.setdefault(stem(word), word)
    return out


def _neighbours(tables: Mapping[str, TableInfo], names: Iterable[str]) -> set[str]:
    """Tables one foreign key from any of ``names``, either direction."""
    wanted = set(names)
    found: set[str] = set()
    for name, info in tables.items():
        for fk in info.foreign_keys:
            if fk.referred_table not in tables or fk.referred_table == name:
                continue
            if name in wanted:
                found.add(fk.referred_table)
            if fk.referred_table in wanted:
                found.add(name)
    return found


@dataclass(frozen=True)
class ClosingFacts:
    """What is true of the tables a catalogue only counts."""

    unlisted: int
    joining: int  # counted tables sharing a foreign key with a shown table
    matching: int  # counted tables having one of ``matched`` words
    matched: tuple[str, ...]  # the question's words some counted table has
    unknown: tuple[str, ...]  # the question's words no table of the database has


def closing_facts(
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    shown: Sequence[str],
    named: Sequence[str],
    *,
    postings: Mapping[str, frozenset[str]] | None = None,
    neighbours: Iterable[str] | None = None,
) -> ClosingFacts:
    """The facts about the tables neither ``shown`` nor ``named``. ``postings`` (from
    ``word_postings``) and ``neighbours`` (the tables one foreign key from ``shown``) may be
    given when already known; they are computed from ``tables`` otherwise."""
    posted = word_postings(tables) if postings is None else postings
    listed = set(shown) | set(named)
    near = _neighbours(tables, shown) if neighbours is None else set(neighbours)
    joining = len(near - listed)
    matching: set[str] = set()
    matched: list[str] = []
    unknown: list[str] = []
    for term, spelled in _question_words(questions).items():
        holders = posted.get(term)
        if not holders:
            if spelled not in OPERATION_WORDS:
                unknown.append(spelled)
            continue
        left = holders - listed
        if left:
            matching |= left
            matched.append(spelled)
    return ClosingFacts(
        unlisted=len(tables) - len(listed),
        joining=joining,
        matching=len(matching),
        matched=tuple(matched),
        unknown=tuple(unknown),
    )


def _quoted(spelled: Sequence[str]) -> str:
    shown = ", ".join(f"'{w}'" for w in spelled[:_WORDS_SHOWN])
    more = len(spelled) - _WORDS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def closing_line(facts: ClosingFacts) -> str:
    """The catalogue's last line: what the counted tables are not, each statement a fact."""
    said: list[str] = []
    if facts.joining == 0 and facts.matching == 0 and not facts.unknown:
        said.append(NOTHING_ELSE)
    else:
        if facts.joining == 0:
            said.append("none shares a foreign key with the tables above")
        else:
            said.append(f"{facts.joining} of them share a foreign key with the tables above")
        if facts.matching:
            said.append(
                f"{facts.matching} of them have the question's words {_quoted(facts.matched)} "
                "in their names, columns or comments"
            )
        elif not facts.unknown:
            said.append("none has the question's words in its names, columns or comments")
        if facts.unknown:
            said.append(
                f"no table or column of the database has the words {_quoted(facts.unknown)}, "
                "so what they name may be stored in any table"
            )
    return CLOSING_PREFIX.format(count=facts.unlisted) + "; ".join(said) + "; " + _TAIL


_HEAD = re.compile(r"^-- (\d+) other tables are not listed: (.*)$")
_JOINING = re.compile(r"^(\d+) of them share a foreign key with the tables above$")
_MATCHING = re.compile(
    r"^(\d+) of them have the question's words (.+) in their names, columns or comments$"
)
_UNKNOWN = re.compile(
    r"^no table or column of the database has the words (.+), "
    r"so what they name may be stored in any table$"
)


def _words_of(quoted: str) -> tuple[list[str], int]:
    """The quoted words of a statement and how many more it counted."""
    more = re.search(r" and (\d+) more$", quoted)
    return re.findall(r"'([^']*)'", quoted), int(more.group(1)) if more else 0


def check_closing(
    text: str,
    questions: Sequence[str],
    tables: Mapping[str, TableInfo],
    shown: Sequence[str],
    named: Sequence[str],
    *,
    postings: Mapping[str, frozenset[str]] | None = None,
) -> list[str]:
    """What is false in the closing line of catalogue ``text`` (empty when every statement is
    true), recomputed from ``tables`` alone: a catalogue that leaves tables out must say so.
    Statements it does not know are reported too, so a new wording cannot slip past."""
    facts = closing_facts(questions, tables, shown, named, postings=postings)
    problems: list[str] = []
    if any(line.startswith(OVERVIEW_START) for line in text.splitlines()):
        posted = word_postings(tables) if postings is None else postings
        found = [w for t, w in _question_words(questions).items() if posted.get(t)]
        if found:
            problems.append(f"says nothing matches, yet tables have the words {found}")
    lines = [line for line in text.splitlines() if _HEAD.match(line)]
    if not lines:
        if facts.unlisted:
            problems.append(f"{facts.unlisted} tables left out, no closing line")
        return problems
    head = _HEAD.match(lines[-1])
    assert head is not None
    if int(head.group(1)) != facts.unlisted:
        problems.append(f"counts {head.group(1)} tables left out, {facts.unlisted} are")
    body = head.group(2)
    if not body.endswith("; " + _TAIL):
        problems.append("the closing line does not end with its rule")
    statements = body.removesuffix("; " + _TAIL).split("; ")
    for statement in statements:
        if statement == NOTHING_ELSE:
            if facts.joining or facts.matching or facts.unknown:
                problems.append(f"claims nothing else matches: {facts}")
        elif statement == "none shares a foreign key with the tables above":
            if facts.joining:
                problems.append(f"{facts.joining} left-out tables share a foreign key")
        elif statement == "none has the question's words in its names, columns or comments":
            if facts.matching or facts.unknown:
                problems.append(f"{facts.matching} left-out tables have the question's words")
        elif m := _JOINING.match(statement):
            if int(m.group(1)) != facts.joining:
                problems.append(f"says {m.group(1)} share a foreign key, {facts.joining} do")
        elif m := _MATCHING.match(statement):
            said, more = _words_of(m.group(2))
            if int(m.group(1)) != facts.matching:
                problems.append(f"says {m.group(1)} have the words, {facts.matching} do")
            if said != list(facts.matched[:_WORDS_SHOWN]) or len(said) + more != len(facts.matched):
                problems.append(f"names the words {said}, they are {list(facts.matched)}")
        elif m := _UNKNOWN.match(statement):
            said, more = _words_of(m.group(1))
            if said != list(facts.unknown[:_WORDS_SHOWN]) or len(said) + more != len(facts.unknown):
                problems.append(f"says no table has {said}, those are {list(facts.unknown)}")
        else:
            problems.append(f"unknown statement: {statement!r}")
    if not any(
        s in (NOTHING_ELSE, "none shares a foreign key with the tables above") or _JOINING.match(s)
        for s in statements
    ):
        problems.append("the line does not say whether left-out tables join the shown ones")
    said_matching = any(
        s == NOTHING_ELSE or _MATCHING.match(s) or s.startswith("none has") for s in statements
    )
    if facts.matching and not said_matching:
        problems.append("left-out tables have the question's words and the line does not say so")
    if facts.unknown and not any(_UNKNOWN.match(s) for s in statements):
        problems.append(f"the words {list(facts.unknown)} match nothing, the line does not say so")
    return problems
