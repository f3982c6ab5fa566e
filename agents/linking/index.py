"""The evidence a schema offers for each of its tables, indexed once, and the ranking it gives.

Every table is described by weighted terms from what the schema itself says: its name (the last
word, the thing a row is, a little more), its comment, its columns' names and comments, sampled
values of its short text columns, and the synonyms of all of those. A question's words are
scored against them with inverse table frequency, so a word every table has (``id``, ``name``)
counts for little. Foreign keys then carry part of a table's score to the tables it joins, so
the join table or look-up a question implies comes along and a table inside the best-matching
part of the schema beats a look-alike standing alone.

Ties are broken by connectivity (links to the best matches, then foreign-key degree), never by
name, and a table that neither matches nor joins one that does scores zero.

Example:
    >>> from agents.schema_explorer import ColumnInfo, TableInfo
    >>> def table(name, *cols):
    ...     return TableInfo(name=name, columns=[ColumnInfo(name=c, type="TEXT") for c in cols])
    >>> index = SchemaIndex({t.name: t for t in (table("telescope", "telescope_id", "aperture"),
    ...                                          table("glacier", "glacier_id", "area"))})
    >>> index.rank("What aperture do the telescopes have?")
    ['telescope']
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass

from agents.linking.synonyms import DEFAULT_SYNONYMS, Synonyms
from agents.linking.terms import identifier_terms, question_words, stem
from agents.schema_explorer import TableInfo

__all__ = ["EvidenceWeights", "SchemaIndex"]


@dataclass(frozen=True)
class EvidenceWeights:
    """How much a question word counts where it is found; the table's best place counts once."""

    name: float = 3.0  # a word of the table's name
    head: float = 1.0  # extra for the name's last word (``line`` in order_line)
    table_comment: float = 2.0  # a word of the table's comment
    column: float = 1.0  # a word of some column's name
    column_comment: float = 0.8  # a word of some column's comment
    value: float = 0.6  # a word of a sampled value
    synonym: float = 0.7  # factor for a word reached through a synonym
    coverage: float = 1.0  # how strongly a table covering more of the question's words wins
    referred_share: float = 0.5  # part of a referring table's own score the referred one gets
    referring_share: float = 0.25  # part of a referred table's own score a referring one gets
    neighbours_counted: int = 2  # a table joining two strong hits gains from both
    seeds: int = 2  # the best tables whose surroundings are preferred
    hops: int = 2  # how far (in foreign keys) a seed's surroundings reach
    coherence: float = 0.3  # part of a seed's score a matching table around it gains


class SchemaIndex:
    """Terms, their rarity and the foreign-key graph of one schema, built once and read-only.

    Args:
        tables: the schema, as ``SchemaExplorer.tables()`` gives it.
        synonyms: word groups applied to the schema's terms (default ``DEFAULT_SYNONYMS``).
        weights: where a word counts how much.
    """

    def __init__(
        self,
        tables: Mapping[str, TableInfo],
        *,
        synonyms: Synonyms | None = None,
        weights: EvidenceWeights | None = None,
    ) -> None:
        self.names = list(tables)
        self.weights = w = weights or EvidenceWeights()
        self.synonyms = DEFAULT_SYNONYMS if synonyms is None else synonyms
        self.position = position = {name: i for i, name in enumerate(self.names)}
        table_terms = [self._table_terms(info) for info in tables.values()]
        postings: dict[str, list[tuple[int, float]]] = {}
        for i, terms in enumerate(table_terms):
            for term, weight in terms.items():
                postings.setdefault(term, []).append((i, weight))
        total = max(len(self.names), 1)
        self.idf = {t: math.log(1.0 + total / len(p)) for t, p in postings.items()}
        self.postings = {t: tuple(p) for t, p in postings.items()}
        self.vocabulary = frozenset(postings)
        # shares[i] = [(j, s)]: table i receives s times table j's own score
        shares: list[dict[int, float]] = [{} for _ in self.names]
        for i, info in enumerate(tables.values()):
            for fk in info.foreign_keys:
                j = position.get(fk.referred_table)
                if j is None or j == i:
                    continue
                shares[j][i] = max(shares[j].get(i, 0.0), w.referred_share)
                shares[i][j] = max(shares[i].get(j, 0.0), w.referring_share)
        self.shares = [tuple(s.items()) for s in shares]
        # receivers[j] = [(i, s)]: the tables that receive s times table j's own score
        receivers: list[list[tuple[int, float]]] = [[] for _ in self.names]
        for i, got in enumerate(shares):
            for j, share in got.items():
                receivers[j].append((i, share))
        self.receivers = [tuple(r) for r in receivers]
        self.degree = [len(s) for s in shares]

    def _table_terms(self, info: TableInfo) -> dict[str, float]:
        w = self.weights
        found: dict[str, float] = {}

        def put(terms: list[str], weight: float) -> None:
            for term in terms:
                if found.get(term, 0.0) < weight:
                    found[term] = weight

        name_terms = identifier_terms(info.name)
        put(name_terms, w.name)
        name_words = identifier_terms(info.name.rsplit("_", 1)[-1])
        put(name_words, w.name + w.head)
        if info.comment:
            put(identifier_terms(info.comment), w.table_comment)
        for column in info.columns:
            put(identifier_terms(column.name), w.column)
            if column.comment:
                put(identifier_terms(column.comment), w.column_comment)
            for value in column.values:
                put(identifier_terms(value), w.value)
        for term, weight in list(found.items()):
            for other in self.synonyms.others(term):
                if found.get(other, 0.0) < weight * w.synonym:
                    found[other] = weight * w.synonym
        return found

    def question_terms(self, question: str) -> dict[str, tuple[str, float]]:
        """Schema term -> (the question word or pair it stands for, weight).

        A question word counts where the schema has it, and two adjacent words count run
        together too (``hive inspection`` / ``hiveinspections``).
        """
        seq = question_words(question)
        terms: dict[str, tuple[str, float]] = {}

        def put(term: str, word: str, weight: float) -> None:
            if terms.get(term, ("", 0.0))[1] < weight:
                terms[term] = (word, weight)

        for word in seq:
            if word in self.vocabulary:
                put(word, word, 1.0)
        for a, b in zip(seq, seq[1:], strict=False):
            joined = stem(a + b)
            if joined in self.vocabulary:
                put(joined, a + b, 1.0)
        return terms

    def own_scores(self, question: str) -> dict[int, float]:
        """Each matching table's own score (by position), before its neighbours' shares.

        Each question word counts once per table, at its best match; the sum is then scaled by
        the share of the question's words (by rarity) the table covers, so one rare word in a
        table's name does not outweigh a table that has most of what was asked.
        """
        sums: dict[int, float] = {}
        covered: dict[int, float] = {}
        terms = self.question_terms(question)
        for term, (_, weight) in terms.items():  # one schema term per question word or pair
            idf = self.idf[term]
            scaled = idf * weight
            for i, field_weight in self.postings[term]:
                sums[i] = sums.get(i, 0.0) + scaled * field_weight
                covered[i] = covered.get(i, 0.0) + idf
        whole = sum(self.idf[t] for t in terms) or 1.0
        power = self.weights.coverage
        return {i: total * (covered[i] / whole) ** power for i, total in sums.items()}

    def scored(self, question: str, limit: int | None = None) -> list[tuple[str, float]]:
        """``(table, score)`` for the tables that match or join one that does, best first.

        Ties go to the table with more links to the three best matches, then to the more
        connected table, then to the schema's own order.
        """
        own = self.own_scores(question)
        n = self.weights.neighbours_counted
        gains: dict[int, list[float]] = {}
        for j, score in own.items():
            for i, share in self.receivers[j]:
                gains.setdefault(i, []).append(score * share)
        total = dict.fromkeys(gains, 0.0)
        total.update(own)
        for i, got in gains.items():
            total[i] += sum(got if len(got) <= n else sorted(got, reverse=True)[:n])
        self._cohere(own, total)
        links = dict.fromkeys(total, 0)
        for top in heapq.nlargest(3, own, key=own.__getitem__):
            for i, _ in self.shares[top]:
                links[i] += 1
        degree = self.degree

        def key(i: int) -> tuple[float, int, int, int]:
            return (-total[i], -links[i], -degree[i], i)

        order = sorted(total, key=key) if limit is None else heapq.nsmallest(limit, total, key=key)
        return [(self.names[i], total[i]) for i in order]

    def _cohere(self, own: dict[int, float], total: dict[int, float]) -> None:
        """Tables that match and sit within a few foreign keys of the best ones gain a share of them.

        Questions are about one part of a schema; a table near the best matches is more likely
        needed than a look-alike elsewhere.
        """
        w = self.weights
        if not total or w.coherence <= 0:
            return
        seeds = heapq.nlargest(w.seeds, total, key=total.__getitem__)
        bonus: dict[int, float] = {}
        for seed in seeds:
            frontier, seen = [seed], {seed}
            for _ in range(w.hops):
                frontier = [j for i in frontier for j, _ in self.shares[i] if j not in seen]
                seen.update(frontier)
            for i in seen - {seed}:
                if i in own:
                    bonus[i] = max(bonus.get(i, 0.0), w.coherence * total[seed])
        for i, gain in bonus.items():
            total[i] += gain

    def rank(self, question: str, limit: int | None = None) -> list[str]:
        """The tables that match ``question`` or join one that does, best first, at most ``limit``."""
        return [name for name, _ in self.scored(question, None if limit is None else max(limit, 0))]

    def hubs(self, limit: int) -> list[str]:
        """The most connected tables: what to show when a question matches nothing."""
        order = sorted(range(len(self.names)), key=lambda i: (-self.degree[i], i))
        return [self.names[i] for i in order[: max(limit, 0)]]

    def neighbours(self, name: str) -> list[str]:
        """The tables one foreign key from ``name``, either direction."""
        i = self.position[name]
        return [self.names[j] for j, _ in self.shares[i]]
