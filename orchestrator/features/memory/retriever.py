"""Finding the reviewed examples and business notes that fit a question, without any LLM call.

A ``Retriever`` is anything with ``examples(database, question, limit)`` and
``notes(database, text, limit)``; ``FullTextRetriever`` ranks with the state database's own
full-text search (FTS5 on SQLite, ``tsvector`` on PostgreSQL). An embedding retriever can be
added later behind the same two methods without changing any caller.

``choose_examples`` then picks what goes into a prompt: edited examples first among equals
(a reviewer's correction is the strongest evidence), one example per SQL text, and no more
than a token budget.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from orchestrator.features.memory.models import BusinessNote, MemoryExample, ScoredExample
from orchestrator.features.memory.store import MemoryStore

__all__ = [
    "EDITED_BOOST",
    "FullTextRetriever",
    "Retriever",
    "approx_tokens",
    "choose_examples",
    "choose_notes",
]

#: An edited example's relevance is multiplied by this before ranking.
EDITED_BOOST = 1.5


class Retriever(Protocol):
    """Ranks stored examples and notes against a question (higher relevance = closer)."""

    def examples(self, database: str, question: str, limit: int) -> list[ScoredExample]: ...

    def notes(self, database: str, text: str, limit: int) -> list[BusinessNote]: ...


class FullTextRetriever:
    """Full-text ranking in the state database itself: FTS5 bm25, or PostgreSQL ``ts_rank``."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def examples(self, database: str, question: str, limit: int) -> list[ScoredExample]:
        return self.store.search_examples(database, question, limit)

    def notes(self, database: str, text: str, limit: int) -> list[BusinessNote]:
        return self.store.search_notes(database, text, limit)


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about four characters per token), used for budgets."""
    return math.ceil(len(text) / 4)


def example_text(example: MemoryExample) -> str:
    """An example as it is priced against the budget (question plus SQL)."""
    return f"{example.question}\n{example.sql}"


def choose_examples(
    found: Sequence[ScoredExample], *, limit: int, token_budget: int
) -> list[MemoryExample]:
    """At most ``limit`` examples within ``token_budget``: best first, edited preferred, each
    SQL text once. An example too large for what is left of the budget is skipped."""
    ranked = sorted(
        found,
        key=lambda s: (
            -(s.relevance * (EDITED_BOOST if s.example.status == "edited" else 1.0)),
            -s.example.id,
        ),
    )
    chosen: list[MemoryExample] = []
    seen: set[str] = set()
    left = token_budget
    for scored in ranked:
        example = scored.example
        key = " ".join(example.sql.split()).lower()
        cost = approx_tokens(example_text(example))
        if key in seen or cost > left:
            continue
        chosen.append(example)
        seen.add(key)
        left -= cost
        if len(chosen) == limit:
            break
    return chosen


def choose_notes(
    found: Sequence[BusinessNote], *, limit: int, token_budget: int
) -> list[BusinessNote]:
    """Notes in the retriever's order, at most ``limit`` and within ``token_budget``."""
    chosen: list[BusinessNote] = []
    left = token_budget
    for note in found:
        cost = approx_tokens(note.text)
        if cost > left:
            continue
        chosen.append(note)
        left -= cost
        if len(chosen) == limit:
            break
    return chosen
