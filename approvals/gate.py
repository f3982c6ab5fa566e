"""The batched approval gate: one cycle per call, the reviewer asked at most once.

``ApprovalGate.review(items)`` opens a batch (every item validated again, unless the caller
carries this gate's validator's verdict on exactly that SQL, and categorised: denied /
auto-approved / needs approval), asks the reviewer ONCE when anything needs approval,
checks the decision covers exactly the pending set, re-validates edits, and records the result
in the store with a conditional update. What may run is then ``outcome.runnable(call_id)``,
claimed through ``gate.ledger.executing(outcome, call_id)`` so it runs at most once.

``open`` and ``submit`` are the two halves, for a decision that arrives later or from another
process (a reviewer's command line, an HTTP endpoint); ``await_outcome`` waits for it without
blocking an event loop, woken by the decision's notification (``approvals.notify``) with
polling behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from .audit import SYSTEM_ACTOR, opened_event, reopened_event, resolution_events, vote_event
from .decisions import (
    DecisionPairs,
    Validate,
    ValidationLike,
    combine_votes,
    decision_digest,
    normalise_decisions,
    refusal_text,
    resolve_decisions,
    settled_resolution,
)
from .errors import AuthorMayNotDecide, BatchExpired, DecisionConflict, DuplicateVote
from .expiry import expire
from .ledger import ExecutionLedger
from .models import (
    ApprovalBatch,
    ApprovalItem,
    ApprovalOutcome,
    Approve,
    BatchRecord,
    Edit,
    ExpiryAction,
    ItemCategory,
    Resolution,
    Vote,
    VoteReview,
    findings_of,
    new_id,
    sql_hash,
)
from .notify import WakeReason
from .policy import Policy
from .reviewers import ApproveAll
from .risk import RiskApproval, StatementRisk
from .store import ApprovalStore, MemoryApprovalStore

Reviewer = Callable[[ApprovalBatch], Mapping[str, Any] | Iterable[tuple[str, Any]]]
Clock = Callable[[], datetime]
#: ``assess(item) -> StatementRisk``: the engine's estimate and the policy's level for one item.
Assess = Callable[[ApprovalItem], StatementRisk | None]

# A vote that loses a race to another reviewer's vote is re-applied on the new version.
_VOTE_ATTEMPTS = 20


def utc_now() -> datetime:
    return datetime.now(UTC)


class ApprovalGate:
    """One run's approval gate.

    ``reviewer(batch) -> {call_id: decision}`` is asked once per cycle, only when something needs
    approval. ``validate(sql)`` is the safety validator (``SqlValidator.validate`` fits).
    ``policy`` auto-approves explicitly (None: nothing is auto-approved). ``store`` defaults to
    a fresh ``MemoryApprovalStore``; ``clock`` returns aware datetimes. ``quorum``: distinct
    reviewers needed (default 1). ``ttl``: time a batch may wait before ``on_expiry`` applies
    (None: no deadline). ``actor``: the reviewer identity recorded for ``review``. ``context``:
    stored with each batch for reviewers in other processes (e.g. ``{"dialect": "postgres"}``,
    so they can validate edits as this run would). ``assess``: the risk of each statement the
    validator accepted, taken before review and stored with the item; ``risk_approval``: the
    rule of each level (a batch needs the highest quorum its pending items call for; an item
    whose level may not be auto-approved goes to a reviewer whatever ``policy`` says). Every
    edit is assessed again on ``submit`` (see there). ``authors``: who wrote or asked for the SQL
    of this run's batches (never evidence for earned trust); ``four_eyes``: refuse their decisions.
    """

    def __init__(
        self,
        reviewer: Reviewer | None,
        validate: Validate,
        policy: Policy | None = None,
        store: ApprovalStore | None = None,
        clock: Clock = utc_now,
        *,
        run_id: str | None = None,
        actor: str = "reviewer",
        quorum: int = 1,
        ttl: timedelta | None = None,
        on_expiry: ExpiryAction = "reject",
        context: Mapping[str, Any] | None = None,
        assess: Assess | None = None,
        risk_approval: RiskApproval | None = None,
        authors: Iterable[str] = (),
        four_eyes: bool = False,
    ) -> None:
        if quorum < 1:
            raise ValueError("quorum must be at least 1")
        self.reviewer = reviewer
        self.validate = validate
        self.policy = policy
        self.store = store if store is not None else MemoryApprovalStore()
        self.clock = clock
        self.run_id = run_id or new_id("run")
        self.actor = actor
        self.quorum = quorum
        self.ttl = ttl
        self.on_expiry = on_expiry
        self.context = dict(context or {})
        self.assess = assess
        self.risk_approval = risk_approval or RiskApproval()
        self.authors = sorted({a for a in authors if a})
        self.four_eyes = four_eyes
        self.ledger = ExecutionLedger(self.store, clock)

    # -- one whole cycle -------------------------------------------------------------------
    def review(
        self,
        items: Sequence[ApprovalItem],
        verdicts: Mapping[str, ValidationLike] | None = None,
    ) -> ApprovalOutcome:
        """Open a batch of ``items``, ask the reviewer once if needed, return the outcome.
        ``verdicts``: as for ``open``.

        Raises ``DecisionError`` when the reviewer's decision is refused (the batch stays
        pending, nothing runs) and ``ApprovalCancelled`` when the reviewer cancels. With a
        quorum above 1 the outcome may be ``pending``: see ``await_outcome``.
        """
        batch = self.open(items, verdicts)
        if not batch.pending:
            return self.outcome(batch.batch_id)
        if self.reviewer is None:
            raise RuntimeError("this gate has no reviewer; submit the decision with submit()")
        if batch.four_eyes and batch.authors:
            # a reviewer in the asking process (a terminal prompt, --yes) is the asker
            raise AuthorMayNotDecide(batch.batch_id, batch.authors[0])
        decisions = self.reviewer(batch)
        return self.submit(
            batch.batch_id,
            decisions,
            actor=self.actor,
            reviewed=True,
            review="unseen" if isinstance(self.reviewer, ApproveAll) else "reviewed",
        )

    async def areview(self, items: Sequence[ApprovalItem]) -> ApprovalOutcome:
        """``review`` in a worker thread, so a prompt or validator never blocks the event loop."""
        return await asyncio.to_thread(self.review, items)

    # -- the two halves --------------------------------------------------------------------
    def open(
        self,
        items: Sequence[ApprovalItem],
        verdicts: Mapping[str, ValidationLike] | None = None,
    ) -> ApprovalBatch:
        """Categorise ``items`` into a new batch of the next cycle and store it.

        A batch with nothing pending is resolved at once (denied and auto-approved items).

        ``verdicts`` (by ``call_id``) carries what this gate's own validator said of an item's
        SQL when the caller validated it just before (the pipeline's safety stage), so a statement
        is validated once. A verdict counts only when it accepted exactly the item's SQL (its
        ``sql`` is the item's, byte for byte); any other item is validated here.
        """
        ids = [i.call_id for i in items]
        if len(set(ids)) != len(ids):
            raise ValueError("two items share a call_id; build each with ApprovalItem.new")
        cycle = self.store.last_cycle(self.run_id) + 1
        now = self.clock()
        carried = verdicts or {}
        categorised = [self._categorise(item, cycle, carried.get(item.call_id)) for item in items]
        authors = set(self.authors)
        if cycle > 1:  # a correction's batch has the authors of the run's earlier ones
            for earlier in self.store.list_batches(run_id=self.run_id):
                authors.update(earlier.batch.authors)
        quorum = max(
            [self.quorum]
            + [
                self.risk_approval.quorum_for(item.risk.level)
                for item, category, _ in categorised
                if item.risk is not None and category is ItemCategory.NEEDS_APPROVAL
            ]
        )
        batch = ApprovalBatch(
            batch_id=new_id("batch"),
            run_id=self.run_id,
            cycle=cycle,
            created_at=now,
            deadline=now + self.ttl if self.ttl is not None else None,
            items=[item for item, _, _ in categorised],
            categories={item.call_id: category for item, category, _ in categorised},
            notes={item.call_id: note for item, _, note in categorised if note},
            quorum=quorum,
            on_expiry=self.on_expiry,
            context=self.context,
            risk_quorum={level: int(n) for level, n in self.risk_approval.quorum.items()},
            authors=sorted(authors),
            four_eyes=self.four_eyes,
        )
        record = self.store.create_batch(batch, [opened_event(batch, now)])
        if not batch.pending:
            resolutions = {i.call_id: settled_resolution(batch, i) for i in batch.items}
            self._finish(record, resolutions, SYSTEM_ACTOR, None, None, reviewed=False, votes=[])
        return batch

    def submit(
        self,
        batch_id: str,
        decisions: Mapping[str, Any] | Iterable[tuple[str, Any]],
        *,
        actor: str | None = None,
        idempotency_key: str | None = None,
        reviewed: bool = True,
        review: VoteReview = "reviewed",
    ) -> ApprovalOutcome:
        """Apply one reviewer's decision to a pending batch; exactly one submission wins it.

        ``review`` says how the vote was given (``Vote.review``): ``unseen`` (``--yes``) and
        ``at_client`` (an MCP client's answer) decide the batch like any other, but never earn
        a template auto-approval.

        A replay by the same reviewer with an accepted submission's idempotency key and the same
        decision returns that result (keys are scoped to the batch and the reviewer). Otherwise
        a decided batch raises ``DecisionConflict`` (``BatchExpired`` after its deadline,
        ``DuplicateVote`` for a second vote by the same reviewer, ``IdempotencyConflict`` for a
        key reused with another decision or by another reviewer), a wrong decision
        ``DecisionError``, and under ``four_eyes`` an author's decision ``AuthorMayNotDecide``;
        none of them changes the stored state.

        Risk of the final SQL decides: every edit is assessed again (``assess``; a gate without
        one counts the edit ``high``, failing closed), and the batch needs the quorum of the
        highest level among its statements as they now stand (the rule recorded with the batch).
        An edit that raises it, or any edit under ``four_eyes``, re-opens the batch with the
        edited SQL in place: the editor's vote counts once (as approving their own text), the
        votes given on the text it replaced are dropped, and the outcome stays ``pending`` until
        the new quorum is met.
        """
        actor = actor or self.actor
        pairs = normalise_decisions(decisions)
        digest = decision_digest(pairs)
        for _ in range(_VOTE_ATTEMPTS):
            record = self.store.get_batch(batch_id)
            replayed = self.store.replay(record, idempotency_key, digest, actor=actor)
            if replayed is not None:
                return self.outcome_of(replayed)
            now = self.clock()
            deadline = record.batch.deadline
            if deadline is not None and now >= deadline:
                expire(self.store, record, now)
                raise BatchExpired(
                    batch_id, f"the deadline {deadline.isoformat()} passed before this decision"
                )
            if (record.batch.four_eyes or self.four_eyes) and actor in {
                *record.batch.authors,
                *self.authors,
            }:
                raise AuthorMayNotDecide(batch_id, actor)
            if any(v.actor == actor for v in record.votes):
                raise DuplicateVote(batch_id, f"{actor} already voted on this batch")
            resolutions = self._assess_edits(
                record.batch,
                resolve_decisions(record.batch, pairs, self.validate, self.store.locate_calls),
            )
            reopened = self._reopened(record.batch, resolutions, actor)
            if reopened is not None:
                vote = Vote(
                    actor=actor,
                    decisions={cid: Approve() if isinstance(d, Edit) else d for cid, d in pairs},
                    decision_digest=digest,
                    idempotency_key=idempotency_key,
                    at=now,
                    review=review,
                )
                try:
                    stored = self.store.resolve(
                        batch_id,
                        expected_version=record.version,
                        outcome=None,
                        status="pending",
                        votes=[vote],
                        events=[
                            vote_event(reopened, actor, now, 1, digest),
                            reopened_event(record.batch, reopened, actor, now),
                        ],
                        actor=actor,
                        batch=reopened,
                    )
                except DecisionConflict:
                    continue
                if reopened.quorum <= 1:  # pragma: no cover - a re-opened batch wants more votes
                    raise DecisionConflict(batch_id, "a re-opened batch needs another vote")
                return self.outcome_of(stored)
            votes = [
                *record.votes,
                Vote(
                    actor=actor,
                    decisions=dict(pairs),
                    decision_digest=digest,
                    idempotency_key=idempotency_key,
                    at=now,
                    review=review,
                ),
            ]
            try:
                if len(votes) < record.batch.quorum:
                    stored = self.store.resolve(
                        batch_id,
                        expected_version=record.version,
                        outcome=None,
                        status="pending",
                        votes=votes,
                        events=[vote_event(record.batch, actor, now, len(votes), digest)],
                        actor=actor,
                    )
                    return self.outcome_of(stored)
                final = combine_votes(
                    record.batch, [*self._earlier_votes(record), (actor, resolutions)]
                )
                return self._finish(record, final, actor, idempotency_key, digest, reviewed, votes)
            except DecisionConflict:
                if record.batch.quorum == 1:
                    raise
        raise DecisionConflict(
            batch_id, "the batch kept changing under concurrent votes; submit again"
        )

    def outcome(self, batch_id: str) -> ApprovalOutcome:
        """The batch's outcome as stored now (``status="pending"`` while it waits)."""
        return self.outcome_of(self.store.get_batch(batch_id))

    async def await_outcome(
        self,
        batch_id: str,
        *,
        poll: float | None = None,
        timeout: float | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        on_wake: Callable[[WakeReason], None] | None = None,
    ) -> ApprovalOutcome:
        """Wait for a decision arriving through the store (another process, the web page).

        The wait ends at the first notification that the batch moved on (this process; other
        processes on PostgreSQL) or after ``sleep(poll)``; either way the stored state is read
        again and decides. ``poll`` defaults to the store's ``wait_poll`` (a long safety net
        where decisions notify, short where only polling can tell). ``on_wake(reason)`` is told
        why each wait ended: ``"process"``, ``"postgres"`` or ``"poll"``. Store reads run in a
        worker thread — never blocking the event loop. Expiry is applied here too when the
        deadline passes. Raises ``TimeoutError``.
        """
        interval = self.store.wait_poll if poll is None else poll
        loop = asyncio.get_running_loop()
        waited = 0.0
        watch = await asyncio.to_thread(self.store.watch, batch_id)
        try:
            while True:
                watch.take()  # what woke us is read now
                record = await asyncio.to_thread(self.store.get_batch, batch_id)
                if record.status == "pending":
                    expired = await asyncio.to_thread(expire, self.store, record, self.clock())
                    if expired is not None:
                        return expired
                else:
                    return self.outcome_of(record)
                if timeout is not None and waited >= timeout:
                    raise TimeoutError(f"no decision for {batch_id} after {waited:g} s")
                started = loop.time()
                reason = await watch.wait(interval, sleep)
                waited += interval if reason == "poll" else loop.time() - started
                if on_wake is not None:
                    on_wake(reason)
        finally:
            watch.close()

    @staticmethod
    def outcome_of(record: BatchRecord) -> ApprovalOutcome:
        if record.outcome is not None:
            return record.outcome
        batch = record.batch
        return ApprovalOutcome(
            batch_id=batch.batch_id,
            run_id=batch.run_id,
            cycle=batch.cycle,
            status="pending",
            resolutions={},
            votes=len(record.votes),
            quorum=batch.quorum,
        )

    # -- internals -------------------------------------------------------------------------
    def _categorise(
        self, item: ApprovalItem, cycle: int, verdict: ValidationLike | None = None
    ) -> tuple[ApprovalItem, ItemCategory, str | None]:
        if item.cycle != cycle:
            item = item.model_copy(update={"cycle": cycle})
        if item.refused:
            errors = [f for f in item.findings if f.severity == "error"]
            note = (
                f"{errors[0].code}: {errors[0].message}" if errors else "refused by the validator"
            )
            return item, ItemCategory.DENIED, note
        # The gate does not trust its caller: the SQL shown is the SQL the validator would run.
        # A carried verdict stands only when it accepted exactly this SQL.
        if verdict is not None and verdict.ok and verdict.sql == item.sql:
            result = verdict
        else:
            result = self.validate(item.sql)
        if not result.ok or not result.sql:
            refused = item.model_copy(
                update={"refused": True, "findings": findings_of(result.findings)}
            )
            return refused, ItemCategory.DENIED, refusal_text(result)
        if result.sql != item.sql:
            known = {(f.code, f.message) for f in item.findings}
            extra = [f for f in findings_of(result.findings) if (f.code, f.message) not in known]
            item = ApprovalItem(
                **item.model_dump(exclude={"sql", "sql_hash", "findings"}),
                sql=result.sql,
                sql_hash=sql_hash(result.sql),
                findings=[*item.findings, *extra],
            )
        if self.assess is not None and not (result is verdict and item.risk is not None):
            # a risk carried with this gate's own verdict on exactly this SQL was taken by
            # ``assess_item`` just before (the pipeline's split by risk): not assessed twice
            item = item.model_copy(update={"risk": self._risk(item)})
        if self.policy is not None and (
            item.risk is None or self.risk_approval.may_auto_approve(item.risk.level)
        ):
            why = self.policy(item)
            if why:
                return (
                    item,
                    ItemCategory.AUTO_APPROVED,
                    why if isinstance(why, str) else "auto-approved by policy",
                )
        return item, ItemCategory.NEEDS_APPROVAL, None

    def assess_item(self, item: ApprovalItem) -> StatementRisk | None:
        """The risk ``open`` would give ``item`` (None without ``assess``)."""
        return self._risk(item) if self.assess is not None else None

    def _risk(self, item: ApprovalItem) -> StatementRisk | None:
        """The item's risk; one that cannot be assessed is high (fail closed: never automatic)."""
        assert self.assess is not None
        try:
            return self.assess(item)
        except Exception as exc:  # an assessor's own bug must not open a way around review
            return StatementRisk(
                level="high", reasons=[f"the risk could not be assessed ({type(exc).__name__})"]
            )

    def _assess_edits(
        self, batch: ApprovalBatch, resolutions: dict[str, Resolution]
    ) -> dict[str, Resolution]:
        """``resolutions`` with the risk of every edited SQL assessed on that SQL (an edit that
        re-opened the batch already carries its assessment)."""
        assessed = dict(resolutions)
        for call_id, resolution in resolutions.items():
            if resolution.status != "edited" or resolution.sql is None:
                continue
            item = batch.item(call_id)
            if item.edited_from is not None and item.sql_hash == resolution.sql_hash:
                continue
            edited = item.model_copy(
                update={"sql": resolution.sql, "sql_hash": resolution.sql_hash, "risk": None}
            )
            risk = (
                self._risk(edited)
                if self.assess is not None
                else StatementRisk(
                    level="high",
                    reasons=["the edited statement's risk was not assessed where it was decided"],
                )
            )
            assessed[call_id] = resolution.model_copy(update={"risk": risk})
        return assessed

    def _reopened(
        self, batch: ApprovalBatch, resolutions: dict[str, Resolution], actor: str
    ) -> ApprovalBatch | None:
        """The batch with this vote's edits in place and the quorum they need, when they need
        more votes than the batch asked for (or any edit under ``four_eyes``); else None."""
        edits = {
            cid: r
            for cid, r in resolutions.items()
            if r.status == "edited"
            and r.sql is not None
            and not (
                batch.item(cid).edited_from is not None and batch.item(cid).sql_hash == r.sql_hash
            )
        }
        if not edits:
            return None
        rule = RiskApproval(quorum=batch.risk_quorum)
        levels = [(edits[i.call_id].risk if i.call_id in edits else i.risk) for i in batch.pending]
        needed = max([batch.quorum] + [rule.quorum_for(r.level) for r in levels if r is not None])
        if batch.four_eyes:
            needed = max(needed, 2)  # the editor wrote it: another reviewer must approve it
        if needed <= batch.quorum and not batch.four_eyes:
            return None
        items = []
        for item in batch.items:
            edit = edits.get(item.call_id)
            if edit is None or edit.sql is None or edit.sql_hash is None:
                items.append(item)
                continue
            items.append(
                item.model_copy(
                    update={
                        "sql": edit.sql,
                        "sql_hash": edit.sql_hash,
                        "findings": edit.findings,
                        "risk": edit.risk,
                        "edited_from": item.edited_from or item.sql,
                        "edited_by": actor,
                    }
                )
            )
        return batch.model_copy(
            update={
                "items": items,
                "quorum": needed,
                "authors": sorted({*batch.authors, actor}),
            }
        )

    def _earlier_votes(self, record: BatchRecord) -> list[tuple[str, dict[str, Resolution]]]:
        earlier = []
        for vote in record.votes:
            pairs: DecisionPairs = list(vote.decisions.items())
            earlier.append(
                (
                    vote.actor,
                    resolve_decisions(record.batch, pairs, self.validate, self.store.locate_calls),
                )
            )
        return earlier

    def _finish(
        self,
        record: BatchRecord,
        resolutions: dict[str, Resolution],
        actor: str,
        idempotency_key: str | None,
        digest: str | None,
        reviewed: bool,
        votes: list[Vote],
    ) -> ApprovalOutcome:
        batch = record.batch
        now = self.clock()
        outcome = ApprovalOutcome(
            batch_id=batch.batch_id,
            run_id=batch.run_id,
            cycle=batch.cycle,
            resolutions=resolutions,
            decided_by=actor,
            decided_at=now,
            reviewed=reviewed,
            votes=len(votes),
            quorum=batch.quorum,
        )
        events = [vote_event(batch, actor, now, len(votes), digest)] if votes and digest else []
        events += resolution_events(
            batch,
            resolutions,
            actor=actor,
            at=now,
            detail={"version": record.version + 1, "idempotency_key": idempotency_key},
        )
        stored = self.store.resolve(
            batch.batch_id,
            expected_version=record.version,
            outcome=outcome,
            events=events,
            idempotency_key=idempotency_key,
            decision_digest=digest,
            votes=votes,
            actor=actor,
        )
        if stored.outcome is None:  # pragma: no cover - resolve always stores an outcome
            raise DecisionConflict(batch.batch_id, "the store returned no outcome")
        return stored.outcome
