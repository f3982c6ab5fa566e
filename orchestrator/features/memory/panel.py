"""What a reviewer is shown next to a statement: what memory knows about it.

For one statement waiting for review: the similar questions reviewers approved before on the
same database (the examples the SQL step is given for this question), the earlier approvals and
rejections of the statement's own template, and the business notes that match the question
(the notes the reasoning step is given for it). No LLM call; read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.features.memory.fingerprint import template_of
from orchestrator.features.memory.models import BusinessNote, MemoryExample
from orchestrator.features.memory.review_memory import MemoryScope, ReviewMemory

__all__ = ["MemoryPanel", "memory_panel"]


@dataclass(frozen=True)
class MemoryPanel:
    """Memory's view of one statement (see the module docstring)."""

    similar: list[MemoryExample] = field(default_factory=list)
    template_id: str = ""
    template_approvals: list[MemoryExample] = field(default_factory=list)
    template_rejections: list[MemoryExample] = field(default_factory=list)
    notes: list[BusinessNote] = field(default_factory=list)


def memory_panel(
    memory: ReviewMemory, scope: MemoryScope, question: str, sql: str, *, similar: int = 5
) -> MemoryPanel:
    """The panel for ``sql`` written for ``question`` on ``scope``'s database."""
    found = memory.retriever.examples(scope.database, question, similar)
    template_id = template_of(sql, scope.dialect).template_id
    same = memory.store.examples(database=scope.database, template_id=template_id, limit=50)
    return MemoryPanel(
        similar=[s.example for s in found],
        template_id=template_id,
        template_approvals=[e for e in same if e.status in ("approved", "edited")],
        template_rejections=[e for e in same if e.kind == "negative"],
        notes=memory.notes_for(scope, question),
    )
