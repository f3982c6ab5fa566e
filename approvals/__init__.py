"""The batched approval gate: every statement of a cycle reviewed at once, only approved SQL runs.

Example:
    >>> from approvals import ApprovalGate, ApprovalItem, ApproveAll
    >>> class Accepted:
    ...     ok, findings, refusal = True, [], None
    ...     def __init__(self, sql): self.sql = sql
    >>> gate = ApprovalGate(reviewer=ApproveAll(), validate=Accepted)
    >>> item = ApprovalItem.new(question_id="q1", question="How many regions?", sql="SELECT COUNT(*) FROM regions")
    >>> gate.review([item]).runnable(item.call_id)
    'SELECT COUNT(*) FROM regions'
"""

from .decisions import ValidationLike, normalise_decisions, resolve_decisions
from .errors import (
    ApprovalCancelled,
    ApprovalError,
    BatchExpired,
    BatchNotFound,
    DecisionConflict,
    DecisionError,
    DecisionProblem,
    IdempotencyConflict,
    NotRunnable,
    SchemaVersionError,
    SqlHashMismatch,
    StoreError,
)
from .gate import ApprovalGate, Reviewer
from .models import (
    ApprovalBatch,
    ApprovalItem,
    ApprovalOutcome,
    Approve,
    AuditEvent,
    BatchRecord,
    Decision,
    Edit,
    ItemCategory,
    ItemFinding,
    Reject,
    Resolution,
    parse_decision,
    sql_hash,
)
from .policy import AutoApprovePolicy
from .reviewers import ApproveAll, MappingReviewer, RejectAll
from .sql_store import SqlApprovalStore, default_store_url
from .store import ApprovalStore, CallLocation, MemoryApprovalStore
from .terminal import TerminalReviewer

__all__ = [
    "ApprovalBatch",
    "ApprovalCancelled",
    "ApprovalError",
    "ApprovalGate",
    "ApprovalItem",
    "ApprovalOutcome",
    "ApprovalStore",
    "Approve",
    "ApproveAll",
    "AuditEvent",
    "AutoApprovePolicy",
    "BatchExpired",
    "BatchNotFound",
    "BatchRecord",
    "CallLocation",
    "Decision",
    "DecisionConflict",
    "DecisionError",
    "DecisionProblem",
    "Edit",
    "IdempotencyConflict",
    "ItemCategory",
    "ItemFinding",
    "MappingReviewer",
    "NotRunnable",
    "Reject",
    "RejectAll",
    "Resolution",
    "Reviewer",
    "SchemaVersionError",
    "SqlApprovalStore",
    "SqlHashMismatch",
    "StoreError",
    "TerminalReviewer",
    "ValidationLike",
    "default_store_url",
    "normalise_decisions",
    "parse_decision",
    "resolve_decisions",
    "sql_hash",
]
