"""Where the pipeline's stages meet memory: small functions, each a no-op without memory.

``memory_hooks(memory)`` hands them to a run as its ``RunHooks`` (``orchestrator.core.hooks``):

- ``notes_by_question``    Batch 1 (reasoning): business notes per question
- ``vocabulary``           Batch 1 on a large schema: the analysts' words for its tables
- ``examples_by_question`` Batch 2 (generation): reviewed examples per question
- ``remember_executed``    after execution: approved or edited statements that ran (not those
                           approved wholesale by ``--yes``: no person looked at them)
- ``remember_rejected``    after review: statements a reviewer rejected (negatives)
- ``gate_policy``          the approval gate: earned auto-approval, when switched on

Trust is keyed on what was actually reviewed: a run's statements are recorded, and earned
auto-approval looks its evidence up, under the policy the run is judged by (a role's narrowed
policy, recorded when the run started), never the base policy of whichever process resumes it;
and on the database the run is bound to (``Pipeline`` refuses another database's run first).
Only votes of proven reviewers at a review screen count as evidence (``Vote.review``): a
statement approved unseen (``--yes``) is not recorded at all, one answered at an MCP client is
recorded as an example for prompts but vouches for nothing.

Recording never fails a run: a state-database error while remembering is logged and skipped.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.exc import SQLAlchemyError

from agents.linking import Usage
from approvals.models import Edit
from approvals.policy import Policy
from orchestrator.core.hooks import HookHost, RunHooks
from orchestrator.features.memory.review_memory import MemoryScope, ReviewMemory

if TYPE_CHECKING:
    from approvals import ApprovalGate, ApprovalOutcome
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.question import PendingStatement, QuestionState
    from orchestrator.core.run_context import RunContext
    from safety import Policy as SafetyFile

__all__ = [
    "examples_by_question",
    "gate_policy",
    "memory_hooks",
    "notes_by_question",
    "remember_executed",
    "remember_rejected",
    "scope_for",
    "scope_of",
    "vocabulary",
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

    def run_policy(self, ctx: RunContext) -> SafetyFile: ...


#: Memory scopes per open database: (the schema read they were built from, {policy: scope}).
_scopes: weakref.WeakKeyDictionary[TargetDatabase, tuple[object, dict[str, MemoryScope]]] = (
    weakref.WeakKeyDictionary()
)
_scopes_lock = threading.Lock()


def _memory(p: MemoryUser) -> ReviewMemory | None:
    return p.memory


@dataclass(frozen=True)
class _WithMemory:
    """The pipeline a hook was called by (``HookHost``), with the memory the hooks were made
    for: what the functions below read (``MemoryUser``)."""

    host: HookHost
    memory: ReviewMemory

    @property
    def db(self) -> TargetDatabase:
        return self.host.db

    @property
    def reviewer(self) -> object:
        return self.host.reviewer

    def run_policy(self, ctx: RunContext) -> SafetyFile:
        return self.host.run_policy(ctx)


def memory_hooks(memory: ReviewMemory | None) -> RunHooks:
    """A run's hooks into ``memory``: notes and the tables' vocabulary for Batch 1, examples
    for Batch 2, earned auto-approval at the gate, and what reviewers approved, edited or
    rejected recorded after each cycle. No hooks without memory (``SQLGATE_MEMORY=off``)."""
    if memory is None:
        return RunHooks()
    known = memory

    def on(host: HookHost) -> _WithMemory:
        return _WithMemory(host, known)

    return RunHooks(
        notes=lambda host, qs: notes_by_question(on(host), qs),
        vocabulary=lambda host: vocabulary(on(host)),
        examples=lambda host, qs: examples_by_question(on(host), qs),
        earned_approval=lambda host, policy, key: gate_policy(on(host), policy, key=key),
        after_execution=lambda host, ctx, ran, gate: remember_executed(on(host), ctx, ran, gate),
        after_rejection=lambda host, ctx, pending, outcome, gate: remember_rejected(
            on(host), ctx, pending, outcome, gate
        ),
    )


#: Reviewed questions read per database for the ranker's vocabulary, newest first.
USAGE_EXAMPLES = 500


def vocabulary(p: MemoryUser) -> Usage | None:
    """What notes and reviewed questions (with the hints their askers added) said about this
    database's tables: the ranker learns the analysts' words for them ("borrowers" for
    ``client``), so a later question without a hint benefits. Only when memory feeds prompts."""
    memory = _memory(p)
    if memory is None:
        return None
    settings = memory.settings
    if not (settings.notes_per_question or settings.examples_per_question):
        return None
    database = p.db.safe_url
    if memory.store.is_empty(database):
        return None
    usage = Usage()
    for note in memory.store.notes(database):
        for table in note.tables:
            usage.add(table, [note.text])
    for example in memory.store.examples(database=database, kind="positive", limit=USAGE_EXAMPLES):
        for table in example.tables:
            usage.add(table, [example.question, example.hint])
    return usage or None


def scope_for(
    database: TargetDatabase, policy: SafetyFile, *, key: str | None = None
) -> MemoryScope:
    """A database as memory sees it, under a policy (schema from the explorer's cache), keyed on
    ``key`` (a run's recorded database) or else the database's URL without password. The whole
    policy is fingerprinted: a role's narrowed policy (``roles`` emptied, its limits) is never
    the base policy, even where the validator's part of both is the same.

    Built once per database, schema read, key and policy, then shared: fingerprinting the
    schema and building its resolver cost as much as the whole database, not as one statement."""
    tables = database.schema.tables()
    dumped = policy.model_dump(mode="json")
    name = key or database.safe_url
    cache_key = json.dumps([name, dumped], sort_keys=True, default=str)
    with _scopes_lock:
        cached = _scopes.get(database)
        if cached is None or cached[0] is not tables:
            cached = (tables, {})
            _scopes[database] = cached
        scope = cached[1].get(cache_key)
        if scope is None:
            scope = MemoryScope.of(
                name,
                database.dialect,
                {t: [(c.name, c.type) for c in info.columns] for t, info in tables.items()},
                dumped,
            )
            cached[1][cache_key] = scope
        return scope


def scope_of(
    p: MemoryUser, policy: SafetyFile | None = None, *, key: str | None = None
) -> MemoryScope:
    """The pipeline's database under ``policy`` (default: the database's base policy)."""
    return scope_for(p.db, policy or p.db.policy, key=key)


def run_scope(p: MemoryUser, ctx: RunContext) -> MemoryScope:
    """The run's recorded database under the policy the run is judged by (recorded when it
    started): never what the resuming process was started with."""
    return scope_of(p, p.run_policy(ctx), key=ctx.database)


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


def _reviewers(gate: ApprovalGate, outcome: ApprovalOutcome) -> list[str] | None:
    """Every reviewer whose vote decided the batch at a review screen (a quorum has several),
    leaving out the batch's authors (the asker, an agent that submitted the SQL, an editor);
    None when every vote approved unseen (``--yes``): nothing to learn from. Votes answered at
    an MCP client are left out (an example with no reviewers vouches for nothing)."""
    try:
        record = gate.store.get_batch(outcome.batch_id)
        votes, authors = record.votes, set(record.batch.authors)
    except Exception:  # a store without the batch: the deciding actor is what is known
        votes, authors = [], set()
    if not votes:
        return [outcome.decided_by] if outcome.decided_by else []
    if all(v.review == "unseen" for v in votes):
        return None
    # the author of the SQL (who asked, submitted or edited it) never vouches for it
    editors = {v.actor for v in votes if any(isinstance(d, Edit) for d in v.decisions.values())}
    return [
        v.actor
        for v in votes
        if v.review == "reviewed" and v.actor not in authors and v.actor not in editors
    ]


def _standing_sql(gate: ApprovalGate, outcome: ApprovalOutcome) -> dict[str, str]:
    """call_id -> the SQL each item of the batch stood at when decided (an edit that re-opened
    the batch replaced the statement first shown)."""
    try:
        batch = gate.store.get_batch(outcome.batch_id).batch
    except Exception:  # a store without the batch: the statements as the run sent them
        return {}
    return {item.call_id: item.sql for item in batch.items}


def _unreviewed(p: MemoryUser) -> bool:
    """``--yes`` approves every statement unseen: such approvals are no evidence of review."""
    from approvals import ApproveAll

    return isinstance(p.reviewer, ApproveAll)


def remember_executed(
    p: MemoryUser,
    ctx: RunContext,
    ran: Sequence[tuple[QuestionState, ApprovalOutcome, str]],
    gate: ApprovalGate,
) -> None:
    """Record each statement a reviewer approved or edited and that ran without error, under
    the run's policy, with the review event (the batch) it was decided in."""
    memory = _memory(p)
    if memory is None or not ran or _unreviewed(p):
        return
    try:
        scope = run_scope(p, ctx)
        for q, outcome, call_id in ran:
            resolution = outcome.resolutions[call_id]
            status = str(resolution.status)
            if status not in ("approved", "edited") or q.sql is None:
                continue  # auto-approved statements are not new evidence
            reviewers = _reviewers(gate, outcome)
            if reviewers is None:
                continue  # approved unseen: no person's review to learn from
            memory.record(
                scope,
                question=q.text,
                sql=q.sql,
                status="edited" if status == "edited" else "approved",
                reviewers=reviewers,
                call_id=call_id,
                batch_id=outcome.batch_id,
                clarifications=q.assumptions,
                hint=q.hint,
            )
    except SQLAlchemyError as exc:
        log.warning("could not record reviewed statements in memory: %s", exc)


def remember_rejected(
    p: MemoryUser,
    ctx: RunContext,
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
        scope = run_scope(p, ctx)
        reviewers = _reviewers(gate, outcome) or []
        standing = _standing_sql(gate, outcome)
        for call_id, s in rejected:
            # the text that was rejected: an edit that re-opened the batch, when there was one
            sql = standing.get(call_id) or (s.item.sql if s.item is not None else s.q.sql)
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
                batch_id=outcome.batch_id,
            )
    except SQLAlchemyError as exc:
        log.warning("could not record rejected statements in memory: %s", exc)


def gate_policy(
    p: MemoryUser, policy: SafetyFile | None = None, *, key: str | None = None
) -> Policy | None:
    """Earned auto-approval for the pipeline's database (``key``: the run's recorded one) under
    ``policy`` (the run's; default the base policy), or None (no memory, or switched off)."""
    memory = _memory(p)
    if memory is None or not memory.settings.auto_approval.enabled:
        return None
    return memory.auto_approval(scope_of(p, policy, key=key))
