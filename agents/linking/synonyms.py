"""Words that name the same thing, so a question's word can reach a schema's other word.

A ``Synonyms`` value holds groups of words that stand for one another (``colony``, ``hive``).
It is applied to the schema side: a table whose name says ``hive`` also answers to
``colony``, with less weight than its own words. Users extend it with their own vocabulary
(``Synonyms({"colony": ["hive"]})``, or a TOML file read by ``Synonyms.load``);
business notes plug in the same way.

The built-in groups (``DEFAULT_SYNONYMS``) are only the short forms schema designers write
everywhere (``qty`` for quantity) and the adjectives English asks a measure with ("how old" for
``age``, "cheapest" for ``price``); no domain's vocabulary belongs here.

A file holds one table of groups, each key a word and its value the words it stands for::

    [synonyms]
    colony = ["hive"]
    keeper = ["beekeeper", "apiarist"]

Example:
    >>> s = Synonyms({"colony": ["hive"]})
    >>> sorted(s.others("hive"))
    ['coloni']
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

from agents.linking.terms import stem, words

__all__ = ["DEFAULT_SYNONYMS", "Synonyms"]


class Synonyms:
    """Groups of interchangeable words, matched by stem in both directions.

    Args:
        groups: each key stands for each of its values and they for it; multi-word values
            (``"purchase order"``) count as the words they contain.
    """

    def __init__(self, groups: Mapping[str, Iterable[str]] | None = None) -> None:
        self._groups: dict[str, list[str]] = {}
        self._others: dict[str, frozenset[str]] | None = None  # stems, built on first use
        for word, others in (groups or {}).items():
            self.add(word, others)

    def add(self, word: str, others: Iterable[str]) -> None:
        """Make ``word`` and each of ``others`` stand for one another."""
        self._groups.setdefault(word, []).extend(o for o in others if o.strip())
        self._others = None

    def others(self, term: str) -> frozenset[str]:
        """The stems a schema term also answers to (``term`` is itself a stem)."""
        found = self._others
        if found is None:
            found = self._others = self._stemmed()
        return found.get(term, frozenset())

    def _stemmed(self) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for word, others in self._groups.items():
            left = [stem(w) for w in words(word)]
            for other in others:
                right = [stem(w) for w in words(other)]
                for a in left:
                    out.setdefault(a, set()).update(t for t in right if t != a)
                for b in right:
                    out.setdefault(b, set()).update(t for t in left if t != b)
        return {term: frozenset(found) for term, found in out.items()}

    def groups(self) -> dict[str, list[str]]:
        """The groups as given, word -> the words it stands for."""
        return {word: list(others) for word, others in self._groups.items()}

    def __or__(self, other: Synonyms) -> Synonyms:
        """Both sets of groups together: ``DEFAULT_SYNONYMS | Synonyms.load(path)``."""
        merged = Synonyms(self._groups)
        for word, others in other._groups.items():
            merged.add(word, others)
        return merged

    def __len__(self) -> int:
        return len(self._groups)

    def __repr__(self) -> str:
        return f"Synonyms({self._groups!r})"

    @classmethod
    def load(cls, path: str | Path) -> Synonyms:
        """Groups from a TOML file with one ``[synonyms]`` table of word = [words]."""
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        table = data.get("synonyms", {})
        if not isinstance(table, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in table.values()
        ):
            raise ValueError(f"{path}: [synonyms] must map words to lists of words")
        return cls(table)


_CHEAP = ["cheap", "cheaper", "cheapest", "expensive"]

#: Short forms that schemas everywhere use for common words, and the adjectives of measures.
DEFAULT_SYNONYMS = Synonyms(
    {
        "addr": ["address"],
        "amt": ["amount"],
        "avg": ["average"],
        "cnt": ["count"],
        "desc": ["description"],
        "dob": ["birth"],
        "max": ["maximum"],
        "min": ["minimum"],
        "num": ["number"],
        "pct": ["percent"],
        "qty": ["quantity"],
        # the adjective a question asks a measure with, and its comparative and superlative
        "age": ["old", "older", "oldest", "young", "younger", "youngest"],
        "height": ["tall", "taller", "tallest"],
        "weight": ["heavy", "heavier", "heaviest"],
        "distance": ["far", "farther", "farthest", "further", "furthest"],
        "price": _CHEAP,
        "cost": _CHEAP,
        "size": ["big", "bigger", "biggest", "large", "larger", "largest"],
        "duration": ["long", "longer", "longest"],
    }
)
