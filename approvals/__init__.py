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

from .audit import ReplayedBatch, replay_audit
from .decisions import ValidationLike, combine_votes, normalise_decisions, resolve_decisions
from .errors import (
    AlreadyExecuted,
    ApprovalCancelled,
    ApprovalError,
    BatchExpired,
    BatchNotFound,
    DecisionConflict,
    DecisionError,
    DecisionProblem,
    DuplicateVote,
    ExecutionInDoubt,
    IdempotencyConflict,
    NotRunnable,
    SchemaVersionError,
    SqlHashMismatch,
    StoreError,
)
from .expiry import ExpirySweeper
from .gate import ApprovalGate, Reviewer
from .ledger import ExecutionLedger
from .models import (
    ApprovalBatch,
    ApprovalItem,
    ApprovalOutcome,
    Approve,
    AuditEvent,
    BatchRecord,
    BatchSummary,
    Decision,
    Edit,
    ExecutionRecord,
    ItemCategory,
    ItemFinding,
    Reject,
    Resolution,
    Vote,
    parse_decision,
    sql_hash,
)
from .policy import AutoApprovePolicy
from .reviewers import ApproveAll, MappingReviewer, RejectAll
from .service import decide_batch, history, list_pending, reviewer_identity
from .sql_store import SqlApprovalStore, default_store_url
from .store import ApprovalStore, CallLocation, MemoryApprovalStore
from .terminal import TerminalReviewer

__all__ = [
    "AlreadyExecuted",
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
    "BatchSummary",
    "CallLocation",
    "Decision",
    "DecisionConflict",
    "DecisionError",
    "DecisionProblem",
    "DuplicateVote",
    "Edit",
    "ExecutionInDoubt",
    "ExecutionLedger",
    "ExecutionRecord",
    "ExpirySweeper",
    "IdempotencyConflict",
    "ItemCategory",
    "ItemFinding",
    "MappingReviewer",
    "NotRunnable",
    "Reject",
    "RejectAll",
    "ReplayedBatch",
    "Resolution",
    "Reviewer",
    "SchemaVersionError",
    "SqlApprovalStore",
    "SqlHashMismatch",
    "StoreError",
    "TerminalReviewer",
    "ValidationLike",
    "Vote",
    "combine_votes",
    "decide_batch",
    "default_store_url",
    "history",
    "list_pending",
    "normalise_decisions",
    "parse_decision",
    "replay_audit",
    "resolve_decisions",
    "reviewer_identity",
    "sql_hash",
]
