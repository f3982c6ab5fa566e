"""The evidence a schema offers for each of its tables, indexed once, and the ranking it gives.

Every table is described by weighted terms from what the schema itself says: its name (the last
word, the thing a row is, a little more), its comment, its columns' names and comments, sampled
values of its short text columns, the synonyms of all of those, what its abbreviations were
learned to mean (``vocabulary.learned_expansions``), and what people said about it (business
notes, reviewed questions: ``vocabulary.Usage``). A question's words are scored against them
with inverse table frequency, so a word every table has (``id``, ``name``) counts for little.

A question's word reaches a schema term exactly, through a word one derivational suffix away
(``consumption`` and ``consumed``), or as the long form of a short identifier word
(``transactions`` for ``trans``), each step counting less. The values a question names
(``ValueIndex.matches``) count for the tables whose columns hold them. Foreign keys then carry
part of a table's score to the tables it joins, so the join table or look-up a question implies
comes along and a table inside the best-matching part of the schema beats a look-alike standing
alone. When no word reaches anything, words sharing their first letters with a schema word
(misspellings, other short forms) are tried before giving up.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agents.linking.claims import word_postings
from agents.linking.derivation import abbreviates, derived_keys, related
from agents.linking.synonyms import DEFAULT_SYNONYMS, Synonyms
from agents.linking.terms import (
    STOPWORDS,
    compound_parts,
    identifier_terms,
    question_words,
    route_words,
    stem,
    time_words,
    words,
)
from agents.linking.values import ValueMatch
from agents.linking.vocabulary import (
    ABBREVIATION_MAX_CHARS,
    Usage,
    learned_expansions,
    short_forms,
)
from agents.schema_explorer import TableInfo

__all__ = ["EvidenceWeights", "SchemaIndex"]

#: A fuzzy match needs a question word and a schema word to share this many first letters.
FUZZY_PREFIX = 4
#: Matching tables kept per question, best own scores first, before foreign keys spread them.
MATCHES_KEPT = 150


@dataclass(frozen=True)
class EvidenceWeights:
    """How much a question word counts where it is found; the table's best place counts once."""

    name: float = 3.0  # a word of the table's name
    head: float = 1.0  # extra for the name's last word (``line`` in order_line)
    table_comment: float = 2.0  # a word of the table's comment
    column: float = 1.0  # a word of some column's name
    column_comment: float = 0.8  # a word of some column's comment
    value: float = 0.6  # a word of a sampled value (``ColumnInfo.values``)
    synonym: float = 0.7  # factor for a word reached through a synonym or a learned expansion
    usage: float = 1.5  # a word of a note or reviewed question said about the table
    derived: float = 0.7  # factor for a question word one derivational suffix from the term
    abbreviated: float = 0.6  # factor for a question word a schema word abbreviates
    fuzzy: float = 0.35  # factor for a word sharing only its first letters (no match at all)
    value_whole: float = 2.0  # a whole value the question names (from the value index)
    value_word: float = 0.5  # one word of a longer value
    coverage: float = 1.0  # how strongly a table covering more of the question's words wins
    referred_share: float = 0.5  # part of a referring table's own score the referred one gets
    referring_share: float = 0.25  # part of a referred table's own score a referring one gets
    neighbours_counted: int = 2  # a table joining two strong hits gains from both
    seeds: int = 2  # the best tables whose surroundings are preferred
    hops: int = 2  # how far (in foreign keys) a seed's surroundings reach
    coherence: float = 0.3  # part of a seed's score a matching table around it gains


#: One unit of a question: what it stands for in the schema, as (term, factor), and its label.
_Unit = tuple[str, list[tuple[str, float]]]


class SchemaIndex:
    """Terms, their rarity and the foreign-key graph of one schema, built once and read-only.

    Args:
        tables: the schema, as ``SchemaExplorer.tables()`` gives it.
        synonyms: word groups applied to the schema's terms (default ``DEFAULT_SYNONYMS``).
        weights: where a word counts how much.
        usage: what notes and reviewed questions said about tables (``vocabulary.Usage``).
    """

    def __init__(
        self,
        tables: Mapping[str, TableInfo],
        *,
        synonyms: Synonyms | None = None,
        weights: EvidenceWeights | None = None,
        usage: Usage | None = None,
    ) -> None:
        self.names = list(tables)
        self.weights = w = weights or EvidenceWeights()
        self.synonyms = DEFAULT_SYNONYMS if synonyms is None else synonyms
        self.usage = usage or Usage()
        self.expansions = learned_expansions(tables)
        self.short_forms = short_forms(tables)
        self.position = position = {name: i for i, name in enumerate(self.names)}
        # short identifier words (possible abbreviations) and every identifier word, raw -> stem
        # possible abbreviations: raw word -> its stem, and the vowel-less ones by first letter
        self._short: dict[str, str] = {}
        self._skeletons: dict[str, list[tuple[str, str]]] = {}
        self._unsplit: dict[str, list[tuple[str, str]]] = {}
        self._prefixes: dict[str, set[str]] = {}
        table_terms = [self._table_terms(info) for info in tables.values()]
        postings: dict[str, list[tuple[int, float]]] = {}
        for i, terms in enumerate(table_terms):
            for term, weight in terms.items():
                postings.setdefault(term, []).append((i, weight))
        total = max(len(self.names), 1)
        self.idf = {t: math.log(1.0 + total / len(p)) for t, p in postings.items()}
        self.postings = {t: tuple(p) for t, p in postings.items()}
        self.vocabulary = frozenset(postings)
        self._by_key: dict[str, set[str]] = {}
        for term in self.vocabulary:
            for key in derived_keys(term):
                self._by_key.setdefault(key, set()).add(term)
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
        self._component = self._components()
        #: stem -> tables whose names, columns or comments have it (what catalogues' claims
        #: about left-out tables are checked against)
        self.word_postings = word_postings(tables)

    # -- building --------------------------------------------------------------------------

    def _table_terms(self, info: TableInfo) -> dict[str, float]:
        w = self.weights
        found: dict[str, float] = {}

        def put(terms: list[str], weight: float) -> None:
            for term in terms:
                if found.get(term, 0.0) < weight:
                    found[term] = weight

        def identifier(text: str, weight: float) -> None:
            put(identifier_terms(text), weight)
            for raw in words(text):
                if raw.isdigit():
                    continue
                term = stem(raw)
                if len(raw) >= FUZZY_PREFIX:
                    self._prefixes.setdefault(raw[:FUZZY_PREFIX], set()).add(term)
                if 3 <= len(raw) <= ABBREVIATION_MAX_CHARS and raw.isalpha():
                    # a short form stands for a longer word only with the schema's support:
                    # the longer words it abbreviates around it, or a naming pattern
                    spelled = self.short_forms.spelled.get(raw)
                    if spelled:
                        put(sorted(spelled), weight * w.abbreviated)
                    elif raw in self.short_forms.patterned:
                        self._short[raw] = term
                        if not any(ch in "aeiou" for ch in raw[1:]):
                            skeletons = self._skeletons.setdefault(raw[0], [])
                            if (raw, term) not in skeletons:
                                skeletons.append((raw, term))
                elif len(raw) > ABBREVIATION_MAX_CHARS and not compound_parts(raw):
                    # a run of letters the word list cannot split (``useracct``): its first
                    # word may still be asked for (``users``)
                    heads = self._unsplit.setdefault(raw[:FUZZY_PREFIX], [])
                    if (raw, term) not in heads:
                        heads.append((raw, term))
                for expansion in self.expansions.get(raw, ()):
                    put([expansion], weight * w.synonym)

        identifier(info.name, w.name)
        identifier(info.name.rsplit("_", 1)[-1], w.name + w.head)
        if info.comment:
            put(identifier_terms(info.comment), w.table_comment)
        for column in info.columns:
            identifier(column.name, w.column)
            if column.comment:
                put(identifier_terms(column.comment), w.column_comment)
            for value in column.values:
                put(identifier_terms(value), w.value)
        for text in self.usage.texts(info.name):
            put(question_words(text), w.usage)
        for term, weight in list(found.items()):
            for other in self.synonyms.others(term):
                if found.get(other, 0.0) < weight * w.synonym:
                    found[other] = weight * w.synonym
        return found

    def _components(self) -> list[int]:
        """The foreign-key-connected part of the schema each table belongs to."""
        component = [-1] * len(self.names)
        for start in range(len(self.names)):
            if component[start] >= 0:
                continue
            component[start] = start
            stack = [start]
            while stack:
                i = stack.pop()
                for j, _ in self.shares[i]:
                    if component[j] < 0:
                        component[j] = start
                        stack.append(j)
        return component

    # -- a question -------------------------------------------------------------------------

    def question_terms(self, question: str) -> dict[str, tuple[str, float]]:
        """Schema term -> (the question word or pair it stands for, factor): the exact, derived
        and abbreviated matches of each word, and two adjacent words run together
        (``hive inspection`` / ``hiveinspections``)."""
        terms: dict[str, tuple[str, float]] = {}
        for label, candidates in self._units(question, fuzzy=False):
            for term, factor in candidates:
                if terms.get(term, ("", 0.0))[1] < factor:
                    terms[term] = (label, factor)
        return terms

    def _units(self, question: str, *, fuzzy: bool) -> list[_Unit]:
        w = self.weights
        raw = [x for x in words(question) if not x.isdigit() and x not in STOPWORDS]
        units: list[_Unit] = []
        for word in raw:
            term = stem(word)
            candidates: dict[str, float] = {}
            if term in self.vocabulary:
                candidates[term] = 1.0
            for key in derived_keys(term):
                for other in self._by_key.get(key, ()):
                    if other != term and related(term, other):
                        candidates[other] = max(candidates.get(other, 0.0), w.derived)
            shortened = [
                (word[:k], self._short[word[:k]])
                for k in range(3, len(word) - 1)
                if word[:k] in self._short
            ]
            shortened += self._skeletons.get(word[0], ())
            for short, short_term in shortened:
                if short_term != term and abbreviates(short, word):
                    candidates[short_term] = max(candidates.get(short_term, 0.0), w.abbreviated)
            if len(term) >= FUZZY_PREFIX:
                for joined, joined_term in self._unsplit.get(term[:FUZZY_PREFIX], ()):
                    if joined.startswith(term) and len(joined) >= len(term) + 3:
                        candidates[joined_term] = max(
                            candidates.get(joined_term, 0.0), w.abbreviated
                        )
            if fuzzy and not candidates and len(word) >= FUZZY_PREFIX + 1:
                for other in self._prefixes.get(word[:FUZZY_PREFIX], ()):
                    candidates[other] = w.fuzzy
            if candidates:
                units.append((word, sorted(candidates.items())))
        implied = [
            (stem(word), w.synonym)
            for word in time_words(question)
            if stem(word) in self.vocabulary
        ]
        if implied:  # "on 6 5", "tomorrow": the date tables' words, below a word said
            units.append(("(a time)", implied))
        ends = {stem(word) for word in route_words(question)} & self.vocabulary
        if ends:  # "from denver to boston": the tables storing where something goes
            units.append(("(a route)", [(end, w.synonym) for end in sorted(ends)]))
        stems = [stem(x) for x in raw]
        for (a, b), (ra, rb) in zip(
            zip(stems, stems[1:], strict=False), zip(raw, raw[1:], strict=False), strict=False
        ):
            joined = stem(ra + rb)
            if joined in self.vocabulary and joined not in (a, b):
                units.append((ra + rb, [(joined, 1.0)]))
        return units

    def own_scores(
        self, question: str, matches: Sequence[ValueMatch] = (), *, fuzzy: bool = False
    ) -> dict[int, float]:
        """Each matching table's own score (by position), before its neighbours' shares.

        Each question word counts once per table, at its best match; each value the question
        names counts for the tables holding it. The sum is scaled by the share of the question's
        words (by rarity) the table covers, so one rare word in a table's name does not outweigh
        a table that has most of what was asked.
        """
        sums: dict[int, float] = {}
        covered: dict[int, float] = {}
        whole = 0.0
        for _, candidates in self._units(question, fuzzy=fuzzy):
            best: dict[int, float] = {}
            rarity = 0.0
            for term, factor in candidates:
                idf = self.idf[term]
                rarity = max(rarity, idf * factor)
                for i, field_weight in self.postings[term]:
                    score = idf * factor * field_weight
                    if best.get(i, 0.0) < score:
                        best[i] = score
            whole += rarity
            for i, score in best.items():
                sums[i] = sums.get(i, 0.0) + score
                covered[i] = covered.get(i, 0.0) + rarity
        for phrase, holders in _by_phrase(matches, self.position).items():
            idf = math.log(1.0 + len(self.names) / len(holders))
            whole += idf
            for i, match in holders.items():
                words_in = len(match.phrase.split())
                field = (
                    self.weights.value_whole * (1.0 + 0.25 * (words_in - 1))
                    if match.whole
                    else self.weights.value_word
                )
                sums[i] = sums.get(i, 0.0) + idf * field
                covered[i] = covered.get(i, 0.0) + idf
            del phrase
        whole = whole or 1.0
        power = self.weights.coverage
        return {i: total * (covered[i] / whole) ** power for i, total in sums.items()}

    def scored(
        self,
        question: str,
        limit: int | None = None,
        *,
        matches: Sequence[ValueMatch] = (),
    ) -> list[tuple[str, float]]:
        """``(table, score)`` for the tables that match or join one that does, best first.

        ``matches`` are the values the question names (``ValueIndex.matches``). When nothing
        matches at all, words sharing their first letters with a schema word are tried. Ties go
        to the table with more links to the three best matches, then to the more connected
        table, then to the schema's own order.
        """
        own = self.own_scores(question, matches)
        if not own:
            own = self.own_scores(question, matches, fuzzy=True)
        if len(own) > MATCHES_KEPT:  # the long tail of one common word: too weak to matter
            own = dict(heapq.nlargest(MATCHES_KEPT, own.items(), key=lambda item: item[1]))
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

    def confident(self, question: str, *, matches: Sequence[ValueMatch] = ()) -> bool:
        """True when a word of ``question`` reaches the schema whole (exactly, through a
        synonym or one derivational suffix away) or it names a whole stored value; False when
        only short forms or shared first letters do: a guess, not evidence."""
        if any(m.whole for m in matches):
            return True
        floor = min(self.weights.derived, 1.0)
        return any(
            factor >= floor
            for _, candidates in self._units(question, fuzzy=False)
            for _, factor in candidates
        )

    def rank(
        self, question: str, limit: int | None = None, *, matches: Sequence[ValueMatch] = ()
    ) -> list[str]:
        """The tables that match ``question`` or join one that does, best first, at most ``limit``."""
        wanted = None if limit is None else max(limit, 0)
        return [name for name, _ in self.scored(question, wanted, matches=matches)]

    # -- the schema's shape -----------------------------------------------------------------

    def hubs(self, limit: int) -> list[str]:
        """The most connected tables."""
        order = sorted(range(len(self.names)), key=lambda i: (-self.degree[i], i))
        return [self.names[i] for i in order[: max(limit, 0)]]

    def overview(self, limit: int) -> list[str]:
        """A map of the schema: the most connected table of each foreign-key-connected part,
        then the second of each, and so on (largest parts first): what to name when a question
        matches nothing, so every part of the schema is in sight."""
        parts: dict[int, list[int]] = {}
        for i, part in enumerate(self._component):
            parts.setdefault(part, []).append(i)
        ordered = sorted(parts.values(), key=lambda members: (-len(members), members[0]))
        for members in ordered:
            members.sort(key=lambda i: (-self.degree[i], i))
        out: list[str] = []
        depth = 0
        while len(out) < limit and any(depth < len(m) for m in ordered):
            for members in ordered:
                if depth < len(members) and len(out) < limit:
                    out.append(self.names[members[depth]])
            depth += 1
        return out

    def neighbours(self, name: str) -> list[str]:
        """The tables one foreign key from ``name``, either direction."""
        i = self.position[name]
        return [self.names[j] for j, _ in self.shares[i]]

    def bridges(self, names: Sequence[str]) -> list[str]:
        """Tables on a one-table path between two of ``names`` that no foreign key joins
        directly: the join table a question implies but never names (``has_pet`` between
        ``student`` and ``pets``), most paths first."""
        chosen = [self.position[n] for n in names if n in self.position]
        inside = set(chosen)
        found: dict[int, int] = {}
        for a_pos, a in enumerate(chosen):
            near_a = {j for j, _ in self.shares[a]}
            for b in chosen[a_pos + 1 :]:
                if b in near_a:
                    continue
                for j, _ in self.shares[b]:
                    if j in near_a and j not in inside:
                        found[j] = found.get(j, 0) + 1
        order = sorted(found, key=lambda j: (-found[j], j))
        return [self.names[j] for j in order]


def _by_phrase(
    matches: Sequence[ValueMatch], position: Mapping[str, int]
) -> dict[str, dict[int, ValueMatch]]:
    """phrase -> {table position: its strongest match of that phrase}."""
    out: dict[str, dict[int, ValueMatch]] = {}
    for match in matches:
        i = position.get(match.table)
        if i is None:
            continue
        held = out.setdefault(match.phrase, {})
        if i not in held or held[i].strength < match.strength:
            held[i] = match
    return out
