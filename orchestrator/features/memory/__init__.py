"""Reviewed-SQL memory: every review teaches sqlgate something.

Approved and edited statements that ran are stored with their question, template fingerprint and
the schema and policy they were judged under; rejected ones are stored as negatives. Similar
reviewed examples go into Batch 2 and business notes into Batch 1 (full-text retrieval in the
state database; no LLM call), and, when switched on, a template approved often enough by enough
reviewers is auto-approved with that evidence in the audit log.
"""

from orchestrator.features.memory.errors import MemoryNotFound, MemoryStoreError, SeedRefused
from orchestrator.features.memory.fingerprint import (
    StatementShape,
    TemplateFingerprint,
    columns_read,
    policy_fingerprint,
    schema_fingerprint,
    shape_of,
    template_of,
)
from orchestrator.features.memory.hooks import (
    examples_by_question,
    gate_policy,
    notes_by_question,
    remember_executed,
    remember_rejected,
    scope_of,
)
from orchestrator.features.memory.models import (
    BusinessNote,
    MemoryExample,
    Revocation,
    ScoredExample,
)
from orchestrator.features.memory.retriever import FullTextRetriever, Retriever, approx_tokens
from orchestrator.features.memory.review_memory import MemoryScope, MemorySettings, ReviewMemory
from orchestrator.features.memory.store import MemoryStore
from orchestrator.features.memory.wiring import MEMORY_ENV, memory_for, memory_settings

__all__ = [
    "BusinessNote",
    "FullTextRetriever",
    "MEMORY_ENV",
    "MemoryExample",
    "MemoryNotFound",
    "MemoryScope",
    "MemorySettings",
    "MemoryStore",
    "MemoryStoreError",
    "Retriever",
    "ReviewMemory",
    "Revocation",
    "ScoredExample",
    "SeedRefused",
    "StatementShape",
    "TemplateFingerprint",
    "approx_tokens",
    "columns_read",
    "examples_by_question",
    "gate_policy",
    "memory_for",
    "memory_settings",
    "notes_by_question",
    "policy_fingerprint",
    "remember_executed",
    "remember_rejected",
    "schema_fingerprint",
    "scope_of",
    "shape_of",
    "template_of",
]
