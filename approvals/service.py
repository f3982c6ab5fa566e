"""What a reviewer's command line (or an HTTP endpoint) calls: list, show, decide, history.

The reviewer identity never comes from the decision payload, nor from a variable anyone can
set: ``reviewer_identity()`` is the operating system's login name (a name proven by a reviewer
token is the command line's business: ``orchestrator.interfaces.reviewer_identity``).

Example:
    >>> import getpass
    >>> reviewer_identity({"SQLGATE_REVIEWER": "alice"}) == getpass.getuser()
    True
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from typing import Any

from .decisions import Validate
from .errors import BatchExpired, DecisionConflict
from .gate import ApprovalGate, Clock, Reviewer, utc_now
from .models import ApprovalOutcome, AuditEvent, BatchSummary
from .store import ApprovalStore

REVIEWER_ENV = "SQLGATE_REVIEWER"


def reviewer_identity(environ: Mapping[str, str] | None = None) -> str:
    """The operating system's login name. ``$SQLGATE_REVIEWER`` is not read here: a name
    anyone can set proves nothing (``environ`` is accepted for callers that pass one)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        return "unknown-reviewer"


def list_pending(
    store: ApprovalStore, *, run_id: str | None = None, limit: int | None = None
) -> list[BatchSummary]:
    """Pending batches, oldest first, without loading their items (``approvals list``)."""
    return store.list_summaries(status="pending", run_id=run_id, limit=limit)


def decide_batch(
    store: ApprovalStore,
    batch_id: str,
    reviewer: Reviewer,
    validate: Validate,
    *,
    actor: str,
    idempotency_key: str | None = None,
    clock: Clock = utc_now,
) -> ApprovalOutcome:
    """Ask ``reviewer`` (a ``TerminalReviewer``, a ``MappingReviewer.from_json(...)``) about a
    stored batch once and submit its decision as ``actor`` (``approvals decide``).

    Raises what ``ApprovalGate.submit`` raises: ``DecisionError``, ``DecisionConflict``,
    ``BatchExpired``, ``DuplicateVote``, ``IdempotencyConflict``; and ``BatchNotFound``.
    """
    record = store.get_batch(batch_id)
    if record.status != "pending" and idempotency_key is None:
        # nobody is asked about a decided batch; a retry with its key still gets the first result
        error = BatchExpired if record.status == "expired" else DecisionConflict
        raise error(batch_id, f"the batch is already {record.status}")
    gate = ApprovalGate(None, validate, store=store, clock=clock, run_id=record.batch.run_id)
    decisions: Any = reviewer(record.batch)
    return gate.submit(batch_id, decisions, actor=actor, idempotency_key=idempotency_key)


def history(
    store: ApprovalStore,
    *,
    batch_id: str | None = None,
    run_id: str | None = None,
    after: int | None = None,
) -> list[AuditEvent]:
    """The audit log, oldest first (``approvals history``); ``after`` a seq to follow it."""
    return store.audit_log(batch_id=batch_id, run_id=run_id, after=after)
