"""What a reviewer is shown next to a statement: what memory knows about it.

For one statement waiting for review: the similar questions reviewers approved before on the
same database (the examples the SQL step is given for this question), the earlier approvals and
rejections of the statement's own template, and the business notes that match the question
(the notes the reasoning step is given for it). No LLM call; read-only.

An approved example is offered as an edit only while it stands: one whose template was rejected
or revoked after it (superseded) is shown, never offered, and a rejection never is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

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
    #: Ids of the examples shown that may be proposed as an edit (approved, and not superseded).
    offerable: frozenset[int] = frozenset()


def memory_panel(
    memory: ReviewMemory, scope: MemoryScope, question: str, sql: str, *, similar: int = 5
) -> MemoryPanel:
    """The panel for ``sql`` written for ``question`` on ``scope``'s database."""
    found = memory.retriever.examples(scope.database, question, similar)
    template_id = template_of(sql, scope.dialect).template_id
    same = memory.store.examples(database=scope.database, template_id=template_id, limit=50)
    similar_examples = [s.example for s in found]
    approvals = [e for e in same if e.status in ("approved", "edited")]
    return MemoryPanel(
        similar=similar_examples,
        template_id=template_id,
        template_approvals=approvals,
        template_rejections=[e for e in same if e.kind == "negative"],
        notes=memory.notes_for(scope, question),
        offerable=_standing(memory, scope.database, [*similar_examples, *approvals]),
    )


def _standing(
    memory: ReviewMemory, database: str, shown: Iterable[MemoryExample]
) -> frozenset[int]:
    """The approved examples among ``shown`` that no later rejection or revocation of their
    template superseded."""
    positives = [e for e in shown if e.kind == "positive" and e.status in ("approved", "edited")]
    latest: dict[str, datetime] = {}
    for template_id in {e.template_id for e in positives}:
        negatives = memory.store.examples(
            database=database, kind="negative", template_id=template_id, limit=1
        )
        revoked = [
            r.revoked_at
            for r in memory.store.revocations(template_id)
            if r.database in (database, "*")
        ]
        moments = [n.created_at for n in negatives if n.template_id == template_id] + revoked
        if moments:
            latest[template_id] = max(moments)
    return frozenset(
        e.id
        for e in positives
        if e.template_id not in latest or e.created_at > latest[e.template_id]
    )
