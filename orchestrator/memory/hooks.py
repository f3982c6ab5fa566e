"""Where the pipeline's stages meet memory: small functions, each a no-op without memory.

- ``notes_by_question``    Batch 1 (reasoning): business notes per question
- ``examples_by_question`` Batch 2 (generation): reviewed examples per question
- ``remember_executed``    after execution: approved or edited statements that ran (not those
                           approved wholesale by ``--yes``: no person looked at them)
- ``remember_rejected``    after review: statements a reviewer rejected (negatives)
- ``gate_policy``          the approval gate: earned auto-approval, when switched on

Recording never fails a run: a state-database error while remembering is logged and skipped.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.exc import SQLAlchemyError

from approvals.policy import Policy
from orchestrator.memory.review_memory import MemoryScope, ReviewMemory

if TYPE_CHECKING:
    from approvals import ApprovalGate, ApprovalOutcome
    from orchestrator.database import TargetDatabase
    from orchestrator.question import PendingStatement, QuestionState
    from safety import SafetyPolicy

__all__ = [
    "examples_by_question",
    "gate_policy",
    "notes_by_question",
    "remember_executed",
    "remember_rejected",
    "scope_for",
    "scope_of",
]

log = logging.getLogger(__name__)


class MemoryUser(Protocol):
    """What memory needs of the pipeline that uses it (memory never imports the pipeline): the
    database, the memory itself and the reviewer (``--yes`` approvals are no evidence)."""

    @property
    def db(self) -> TargetDatabase: ...

    @property
    def memory(self) -> ReviewMemory | None: ...

    @property
    def reviewer(self) -> object: ...


#: Memory scopes per open database: (the schema read they were built from, {policy: scope}).
_scopes: weakref.WeakKeyDictionary[TargetDatabase, tuple[object, dict[str, MemoryScope]]] = (
    weakref.WeakKeyDictionary()
)
_scopes_lock = threading.Lock()


def _memory(p: MemoryUser) -> ReviewMemory | None:
    return p.memory


def scope_for(database: TargetDatabase, policy: SafetyPolicy) -> MemoryScope:
    """A database as memory sees it, under a safety policy (schema from the explorer's cache).

    Built once per database, schema read and policy, then shared: fingerprinting the schema and
    building its resolver cost as much as the whole database, not as one statement."""
    tables = database.schema.tables()
    dumped = policy.model_dump(mode="json")
    key = json.dumps(dumped, sort_keys=True, default=str)
    with _scopes_lock:
        cached = _scopes.get(database)
        if cached is None or cached[0] is not tables:
            cached = (tables, {})
            _scopes[database] = cached
        scope = cached[1].get(key)
        if scope is None:
            scope = MemoryScope.of(
                database.safe_url,
                database.dialect,
                {name: [(c.name, c.type) for c in info.columns] for name, info in tables.items()},
                dumped,
            )
            cached[1][key] = scope
        return scope


def scope_of(p: MemoryUser) -> MemoryScope:
    """The pipeline's database under the pipeline's safety policy."""
    return scope_for(p.db, p.db.policy.safety_policy())


def examples_by_question(
    p: MemoryUser, qs: Sequence[QuestionState]
) -> dict[str, list[tuple[str, str]]]:
    """qid -> (question, SQL) pairs reviewers approved for similar questions on this database."""
    memory = _memory(p)
    if memory is None or not qs or memory.store.is_empty(p.db.safe_url):
        return {}
    scope = scope_of(p)
    found = {q.qid: memory.examples_for(scope, q.text) for q in qs}
    return {
        qid: [(e.question, e.sql) for e in examples] for qid, examples in found.items() if examples
    }


def notes_by_question(p: MemoryUser, qs: Sequence[QuestionState]) -> dict[str, list[str]]:
    """qid -> business notes that match the question (with the tables they concern)."""
    memory = _memory(p)
    if memory is None or not qs or memory.store.is_empty(p.db.safe_url):
        return {}
    scope = scope_of(p)
    out: dict[str, list[str]] = {}
    for q in qs:
        notes = memory.notes_for(scope, q.text)
        if notes:
            out[q.qid] = [
                n.text + (f" (tables: {', '.join(n.tables)})" if n.tables else "") for n in notes
            ]
    return out


def _reviewers(gate: ApprovalGate, outcome: ApprovalOutcome) -> list[str]:
    """Every reviewer whose vote decided the batch (a quorum has several)."""
    try:
        votes = gate.store.get_batch(outcome.batch_id).votes
    except Exception:  # a store without the batch: the deciding actor is what is known
        votes = []
    actors = [v.actor for v in votes]
    if not actors and outcome.decided_by:
        actors = [outcome.decided_by]
    return actors


def _unreviewed(p: MemoryUser) -> bool:
    """``--yes`` approves every statement unseen: such approvals are no evidence of review."""
    from approvals import ApproveAll

    return isinstance(p.reviewer, ApproveAll)


def remember_executed(
    p: MemoryUser,
    ran: Sequence[tuple[QuestionState, ApprovalOutcome, str]],
    gate: ApprovalGate,
) -> None:
    """Record each statement a reviewer approved or edited and that ran without error."""
    memory = _memory(p)
    if memory is None or not ran or _unreviewed(p):
        return
    try:
        scope = scope_of(p)
        for q, outcome, call_id in ran:
            resolution = outcome.resolutions[call_id]
            status = str(resolution.status)
            if status not in ("approved", "edited") or q.sql is None:
                continue  # auto-approved statements are not new evidence
            memory.record(
                scope,
                question=q.text,
                sql=q.sql,
                status="edited" if status == "edited" else "approved",
                reviewers=_reviewers(gate, outcome),
                call_id=call_id,
                clarifications=q.assumptions,
            )
    except SQLAlchemyError as exc:
        log.warning("could not record reviewed statements in memory: %s", exc)


def remember_rejected(
    p: MemoryUser,
    pending: Mapping[str, PendingStatement],
    outcome: ApprovalOutcome,
    gate: ApprovalGate,
) -> None:
    """Record each statement a reviewer rejected (not a deadline) as a negative, with the reason."""
    memory = _memory(p)
    if memory is None:
        return
    rejected = [
        (call_id, s)
        for call_id, s in pending.items()
        if s.ok
        and call_id in outcome.resolutions
        and str(outcome.resolutions[call_id].status) == "rejected"
        and not (outcome.resolutions[call_id].reason or "").startswith("expired:")
    ]
    if not rejected:
        return
    try:
        scope = scope_of(p)
        reviewers = _reviewers(gate, outcome)
        for call_id, s in rejected:
            sql = s.item.sql if s.item is not None else s.q.sql
            if not sql:
                continue
            memory.record(
                scope,
                question=s.q.text,
                sql=sql,
                status="rejected",
                reviewers=reviewers,
                reason=outcome.resolutions[call_id].reason,
                call_id=call_id,
            )
    except SQLAlchemyError as exc:
        log.warning("could not record rejected statements in memory: %s", exc)


def gate_policy(p: MemoryUser) -> Policy | None:
    """Earned auto-approval for the pipeline's database, or None (no memory, or switched off)."""
    memory = _memory(p)
    if memory is None or not memory.settings.auto_approval.enabled:
        return None
    return memory.auto_approval(scope_of(p))
