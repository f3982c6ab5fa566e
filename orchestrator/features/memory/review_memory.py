"""``ReviewMemory``: what the pipeline learns from reviews, and what it gives back.

It records every reviewed statement (positives that ran, negatives that were rejected) with its
template and the schema and policy it was judged under, finds examples for Batch 2 and notes for
Batch 1 (no LLM call), and is the evidence behind earned auto-approval.

A ``MemoryScope`` says where a statement lives: the database (its URL without password), the
dialect, the schema (for resolving columns), and the fingerprints of schema and safety policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field
from sqlglot.errors import SqlglotError
from sqlglot.schema import MappingSchema

from approvals.envelope import LiteralValue, literal_values
from approvals.policy import ApprovalEvidence, EarnedApprovalRule, EarnedAutoApproval
from orchestrator.features.memory.fingerprint import (
    policy_fingerprint,
    resolver_schema,
    schema_fingerprint,
    shape_of,
    template_of,
)
from orchestrator.features.memory.models import BusinessNote, ExampleStatus, MemoryExample
from orchestrator.features.memory.retriever import (
    FullTextRetriever,
    Retriever,
    choose_examples,
    choose_notes,
)
from orchestrator.features.memory.store import MemoryStore

__all__ = ["MemoryEvidence", "MemoryScope", "MemorySettings", "ReviewMemory"]


class MemorySettings(BaseModel):
    """How much memory may put into prompts, and whether reviews earn auto-approval."""

    model_config = ConfigDict(frozen=True)

    examples_per_question: int = Field(default=3, ge=0, description="Batch-2 examples at most")
    example_tokens: int = Field(
        default=600,
        ge=0,
        description="Token budget of one question's examples (about 4 chars each)",
    )
    candidates: int = Field(default=12, ge=1, description="Examples ranked before choosing")
    notes_per_question: int = Field(default=3, ge=0, description="Batch-1 notes at most")
    note_tokens: int = Field(default=300, ge=0, description="Token budget of one question's notes")
    auto_approval: EarnedApprovalRule = Field(
        default_factory=EarnedApprovalRule, description="Earned auto-approval (off by default)"
    )


@dataclass(frozen=True)
class MemoryScope:
    """One database as memory sees it: identity, dialect, schema and the two fingerprints."""

    database: str
    dialect: str
    schema: Mapping[str, Sequence[str]]
    schema_fp: str
    policy_fp: str

    @cached_property
    def resolver(self) -> MappingSchema | Mapping[str, Sequence[str]]:
        """sqlglot's schema of ``schema``, built once per scope (not once per statement); the
        mapping itself when sqlglot refuses it (``columns_read`` then resolves no column)."""
        try:
            return resolver_schema(self.schema, self.dialect)
        except SqlglotError:
            return self.schema

    @classmethod
    def of(
        cls,
        database: str,
        dialect: str,
        columns: Mapping[str, Sequence[tuple[str, str]]],
        policy: Mapping[str, object],
    ) -> MemoryScope:
        """From ``{table: [(column, type), ...]}`` and the safety policy as a dict."""
        return cls(
            database=database,
            dialect=dialect,
            schema={t: [c for c, _ in cols] for t, cols in columns.items()},
            schema_fp=schema_fingerprint(columns),
            policy_fp=policy_fingerprint(policy),
        )


@dataclass
class MemoryEvidence:
    """The evidence source of ``EarnedAutoApproval`` for one scope (approvals.policy protocol)."""

    store: MemoryStore
    scope: MemoryScope
    used: dict[str, list[int]] = field(default_factory=dict)

    def describe(self, sql: str) -> tuple[str, frozenset[str] | None]:
        shape = shape_of(sql, self.scope.dialect, self.scope.resolver)
        return shape.template.template_id, shape.columns

    def literals(self, sql: str) -> tuple[LiteralValue, ...] | None:
        return literal_values(sql, self.scope.dialect)

    def approvals(self, template_id: str, since: datetime) -> list[ApprovalEvidence]:
        """One piece of evidence per review event: the examples of one approval batch (two
        statements of a batch, decided once by a quorum) are one event, by its reviewers."""
        found = self.store.approvals_of(
            self.scope.database, template_id, self.scope.schema_fp, self.scope.policy_fp, since
        )
        events: dict[str, list[MemoryExample]] = {}
        for e in found:
            if not e.reviewers:
                continue  # approved where no reviewer is proven (at an MCP client): no evidence
            events.setdefault(e.batch_id or f"example {e.id}", []).append(e)
        evidence = []
        for group in events.values():
            first, columns = group[0], [e.columns for e in group]
            evidence.append(
                ApprovalEvidence(
                    ref=", ".join(
                        f"memory example {e.id} ({e.status} {e.created_at:%Y-%m-%dT%H:%M:%SZ})"
                        for e in group
                    ),
                    reviewers=frozenset(r for e in group for r in e.reviewers),
                    at=first.created_at,
                    columns=None
                    if any(c is None for c in columns)
                    else frozenset(c for cols in columns for c in cols or ()),
                    literals=tuple(literal_values(e.sql, e.dialect) for e in group),
                )
            )
        return evidence


class ReviewMemory:
    """Reviewed-SQL memory on a ``MemoryStore``, ranked by a ``Retriever`` (full text by default)."""

    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or MemorySettings()
        self.retriever: Retriever = retriever or FullTextRetriever(store)

    # -- recording -------------------------------------------------------------------------------

    def record(
        self,
        scope: MemoryScope,
        *,
        question: str,
        sql: str,
        status: ExampleStatus,
        reviewers: Sequence[str],
        reason: str | None = None,
        call_id: str | None = None,
        clarifications: Sequence[str] = (),
        batch_id: str | None = None,
        hint: str = "",
    ) -> MemoryExample:
        """Store one reviewed statement; ``status="rejected"`` stores a negative; ``batch_id``
        is the review event it was decided in; ``hint`` what the asker added to the question
        (its words teach the vocabulary with the question's)."""
        return self.store.add_example(
            database=scope.database,
            dialect=scope.dialect,
            question=question,
            sql=sql,
            status=status,
            shape=shape_of(sql, scope.dialect, scope.resolver),
            schema_fp=scope.schema_fp,
            policy_fp=scope.policy_fp,
            reviewers=reviewers,
            reason=reason,
            call_id=call_id,
            clarifications=clarifications,
            batch_id=batch_id,
            hint=hint,
        )

    # -- retrieval -------------------------------------------------------------------------------

    def examples_for(self, scope: MemoryScope, question: str) -> list[MemoryExample]:
        """The reviewed examples for a Batch-2 prompt: similar questions on the same database,
        within the token budget, edited ones preferred."""
        s = self.settings
        if s.examples_per_question == 0:
            return []
        found = self.retriever.examples(scope.database, question, s.candidates)
        return choose_examples(found, limit=s.examples_per_question, token_budget=s.example_tokens)

    def notes_for(self, scope: MemoryScope, question: str) -> list[BusinessNote]:
        """The business notes for a Batch-1 prompt, within the token budget."""
        s = self.settings
        if s.notes_per_question == 0:
            return []
        found = self.retriever.notes(scope.database, question, s.notes_per_question * 3)
        return choose_notes(found, limit=s.notes_per_question, token_budget=s.note_tokens)

    # -- earned auto-approval --------------------------------------------------------------------

    def auto_approval(self, scope: MemoryScope) -> EarnedAutoApproval | None:
        """The gate policy for ``scope``, or None when earned auto-approval is off."""
        if not self.settings.auto_approval.enabled:
            return None
        return EarnedAutoApproval(
            self.settings.auto_approval, MemoryEvidence(self.store, scope), self.store.clock
        )

    def template(self, sql: str, dialect: str) -> str:
        return template_of(sql, dialect).template_id
