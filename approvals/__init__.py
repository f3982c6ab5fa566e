"""The batched approval gate: every statement of a cycle reviewed at once, only approved SQL runs.

Floor: a library at the bottom, below ``orchestrator``; it imports none of sqlgate's other
packages (only ``sqlgate_exports``): the validator reaches it as a callable (``validate=``).

One cycle, as the pipeline drives it::

    gate = ApprovalGate(reviewer, validate=validator.validate, store=SqlApprovalStore(url), run_id=run_id)
    outcome = gate.review(items)              # categorise; ask the reviewer ONCE; check; store
    for call_id in gate.ledger.remaining(outcome):
        with gate.ledger.executing(outcome, call_id) as claim:  # claimed once, hash checked
            statement = validator.validate(claim.sql).statement  # the text as approved, again
            claim.sent()                                # recorded before the database sees it
            executor.run(statement)

- Items (``ApprovalItem``) each get their own ``call_id``; the gate validates each again and
  sorts it: denied (shown, not approvable), auto-approved (only by an explicit policy such as
  ``AutoApprovePolicy``), needs approval. Only the last set reaches the reviewer.
- A decision ``{call_id: Approve() | Reject(reason) | Edit(sql)}`` must cover the pending set
  exactly; otherwise ``DecisionError`` lists every problem and nothing is accepted.
- The store (``MemoryApprovalStore``; ``SqlApprovalStore`` on a SQLite file or PostgreSQL)
  applies a decision with a conditional update on (status, version): exactly one submission
  wins; the same idempotency key replays the first result. Deadlines (``ExpirySweeper``),
  k-of-n quorum votes and the append-only audit log (``replay_audit``) live there too.
- A batch that moves on wakes its waiters (``ApprovalGate.await_outcome``, ``store.on_decisions``):
  in the same process at once, across processes by PostgreSQL ``LISTEN/NOTIFY``; polling is the
  safety net (``approvals.notify``). The stored state, never the notification, decides.
- Reviewers: ``ApproveAll``, ``RejectAll``, ``MappingReviewer`` (dict / JSON file),
  ``TerminalReviewer``; for a reviewer's command line see ``approvals.service``.

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

import typing as _typing

from sqlgate_exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from .audit import ReplayedBatch, replay_audit
    from .decisions import (
        ValidationLike,
        combine_votes,
        normalise_decisions,
        parse_decision_file,
        resolve_decisions,
    )
    from .errors import (
        AlreadyExecuted,
        ApprovalCancelled,
        ApprovalError,
        AuthorMayNotDecide,
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
    from .notify import DecisionSignals, DecisionWatch, PostgresListener, WakeReason
    from .policy import AutoApprovePolicy, EarnedApprovalRule, EarnedAutoApproval
    from .reviewers import ApproveAll, MappingReviewer, RejectAll
    from .risk import RISK_LEVELS, RiskApproval, RiskLevel, StatementRisk
    from .service import decide_batch, history, list_pending, reviewer_identity
    from .sql_store import SqlApprovalStore, default_store_url
    from .store import ApprovalStore, CallLocation, MemoryApprovalStore
    from .terminal import TerminalReviewer

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "AlreadyExecuted": "approvals.errors",
    "ApprovalBatch": "approvals.models",
    "ApprovalCancelled": "approvals.errors",
    "ApprovalError": "approvals.errors",
    "ApprovalGate": "approvals.gate",
    "ApprovalItem": "approvals.models",
    "ApprovalOutcome": "approvals.models",
    "ApprovalStore": "approvals.store",
    "Approve": "approvals.models",
    "ApproveAll": "approvals.reviewers",
    "AuditEvent": "approvals.models",
    "AuthorMayNotDecide": "approvals.errors",
    "AutoApprovePolicy": "approvals.policy",
    "BatchExpired": "approvals.errors",
    "BatchNotFound": "approvals.errors",
    "BatchRecord": "approvals.models",
    "BatchSummary": "approvals.models",
    "CallLocation": "approvals.store",
    "Decision": "approvals.models",
    "DecisionConflict": "approvals.errors",
    "DecisionError": "approvals.errors",
    "DecisionProblem": "approvals.errors",
    "DecisionSignals": "approvals.notify",
    "DecisionWatch": "approvals.notify",
    "DuplicateVote": "approvals.errors",
    "EarnedApprovalRule": "approvals.policy",
    "EarnedAutoApproval": "approvals.policy",
    "Edit": "approvals.models",
    "ExecutionInDoubt": "approvals.errors",
    "ExecutionLedger": "approvals.ledger",
    "ExecutionRecord": "approvals.models",
    "ExpirySweeper": "approvals.expiry",
    "IdempotencyConflict": "approvals.errors",
    "ItemCategory": "approvals.models",
    "ItemFinding": "approvals.models",
    "MappingReviewer": "approvals.reviewers",
    "MemoryApprovalStore": "approvals.store",
    "NotRunnable": "approvals.errors",
    "PostgresListener": "approvals.notify",
    "RISK_LEVELS": "approvals.risk",
    "Reject": "approvals.models",
    "RejectAll": "approvals.reviewers",
    "ReplayedBatch": "approvals.audit",
    "Resolution": "approvals.models",
    "Reviewer": "approvals.gate",
    "RiskApproval": "approvals.risk",
    "RiskLevel": "approvals.risk",
    "SchemaVersionError": "approvals.errors",
    "SqlApprovalStore": "approvals.sql_store",
    "SqlHashMismatch": "approvals.errors",
    "StatementRisk": "approvals.risk",
    "StoreError": "approvals.errors",
    "TerminalReviewer": "approvals.terminal",
    "ValidationLike": "approvals.decisions",
    "Vote": "approvals.models",
    "WakeReason": "approvals.notify",
    "combine_votes": "approvals.decisions",
    "decide_batch": "approvals.service",
    "default_store_url": "approvals.sql_store",
    "history": "approvals.service",
    "list_pending": "approvals.service",
    "normalise_decisions": "approvals.decisions",
    "parse_decision": "approvals.models",
    "parse_decision_file": "approvals.decisions",
    "replay_audit": "approvals.audit",
    "resolve_decisions": "approvals.decisions",
    "reviewer_identity": "approvals.service",
    "sql_hash": "approvals.models",
}

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
    "AuthorMayNotDecide",
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
    "DecisionSignals",
    "DecisionWatch",
    "DuplicateVote",
    "EarnedApprovalRule",
    "EarnedAutoApproval",
    "Edit",
    "ExecutionInDoubt",
    "ExecutionLedger",
    "ExecutionRecord",
    "ExpirySweeper",
    "IdempotencyConflict",
    "ItemCategory",
    "ItemFinding",
    "MappingReviewer",
    "MemoryApprovalStore",
    "NotRunnable",
    "PostgresListener",
    "RISK_LEVELS",
    "Reject",
    "RejectAll",
    "ReplayedBatch",
    "Resolution",
    "Reviewer",
    "RiskApproval",
    "RiskLevel",
    "SchemaVersionError",
    "SqlApprovalStore",
    "SqlHashMismatch",
    "StatementRisk",
    "StoreError",
    "TerminalReviewer",
    "ValidationLike",
    "Vote",
    "WakeReason",
    "combine_votes",
    "decide_batch",
    "default_store_url",
    "history",
    "list_pending",
    "normalise_decisions",
    "parse_decision",
    "parse_decision_file",
    "replay_audit",
    "resolve_decisions",
    "reviewer_identity",
    "sql_hash",
]


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
