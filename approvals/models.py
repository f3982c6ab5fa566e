"""The gate's vocabulary: items, batches, decisions, resolutions, outcomes, audit events.

Every model is a frozen pydantic model, JSON-serialisable, so a batch can be stored, shown
by another process and resumed.

Example:
    >>> item = ApprovalItem.new(question_id="q1", question="How many orders?", sql="SELECT 1")
    >>> item.call_id.startswith("call_"), item.sql_hash == sql_hash("SELECT 1")
    (True, True)
    >>> parse_decision({"action": "reject", "reason": "too broad"})
    Reject(action='reject', reason='too broad')
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from .errors import NotRunnable, SqlHashMismatch
from .risk import RISK_LEVELS, StatementRisk


def sql_hash(sql: str) -> str:
    """The sha256 hex digest of the SQL's UTF-8 bytes: what identifies approved text."""
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


def new_id(prefix: str) -> str:
    """A fresh random identifier such as ``call_3f2a…`` (uuid4 hex, never reused)."""
    return f"{prefix}_{uuid.uuid4().hex}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ItemFinding(_Frozen):
    """A validator finding as the reviewer sees it; built from any finding-like object or dict."""

    code: str = Field(description="Stable machine-readable code of the finding")
    message: str = Field(description="What was found, in words")
    severity: str = Field(default="warning", description="error, rewrite or warning")
    node: str | None = Field(default=None, description="The SQL node kind the finding names")

    @model_validator(mode="before")
    @classmethod
    def _from_any(cls, value: Any) -> Any:
        return _finding_fields(value)


def _finding_fields(value: Any) -> Any:
    """A finding's fields as strings, from a dict, a pydantic model or any object with them."""
    if isinstance(value, dict):
        fields = ("code", "message", "severity", "node")
        return {
            k: str(getattr(value[k], "value", value[k])) for k in fields if value.get(k) is not None
        }
    if hasattr(value, "model_dump"):
        return _finding_fields(value.model_dump(mode="json"))
    if hasattr(value, "code") and hasattr(value, "message"):
        data = {k: getattr(value, k, None) for k in ("code", "message", "severity", "node")}
        return {k: str(getattr(v, "value", v)) for k, v in data.items() if v is not None}
    return value


def findings_of(findings: Iterable[Any] | None) -> list[ItemFinding]:
    return [
        f if isinstance(f, ItemFinding) else ItemFinding.model_validate(f) for f in findings or ()
    ]


class ApprovalItem(_Frozen):
    """One SQL statement awaiting review: its own ``call_id`` even when the SQL is identical."""

    call_id: str = Field(description="Unique id of this statement in this cycle (call_<uuid4 hex>)")
    question_id: str = Field(description="Id of the question the statement serves")
    question: str = Field(description="The question, as the analyst asked it")
    sql: str = Field(description="The SQL shown to the reviewer")
    sql_hash: str = Field(description="sha256 of the SQL's UTF-8 bytes")
    findings: list[ItemFinding] = Field(
        default_factory=list, description="The validator's findings"
    )
    refused: bool = Field(default=False, description="The validator refused this SQL")
    cycle: int = Field(default=1, ge=1, description="The approval cycle the item belongs to")
    risk: StatementRisk | None = Field(
        default=None, description="The engine's estimate and the policy's risk level, before review"
    )
    edited_from: str | None = Field(
        default=None,
        description="The SQL first shown, when a reviewer's edit replaced it and re-opened the batch",
    )
    edited_by: str | None = Field(default=None, description="The reviewer whose edit this SQL is")

    @model_validator(mode="after")
    def _hash_matches(self) -> ApprovalItem:
        if self.sql_hash != sql_hash(self.sql):
            raise ValueError(f"sql_hash of {self.call_id} does not match its SQL")
        return self

    @classmethod
    def new(
        cls,
        *,
        question_id: str,
        question: str,
        sql: str,
        findings: Iterable[Any] | None = None,
        refused: bool = False,
        cycle: int = 1,
    ) -> ApprovalItem:
        return cls(
            call_id=new_id("call"),
            question_id=question_id,
            question=question,
            sql=sql,
            sql_hash=sql_hash(sql),
            findings=findings_of(findings),
            refused=refused,
            cycle=cycle,
        )


class ItemCategory(StrEnum):
    """How the gate sorted an item before interrupting anyone."""

    DENIED = "denied"  # the validator refused it: shown, not approvable
    AUTO_APPROVED = "auto_approved"  # an explicit policy approved it
    NEEDS_APPROVAL = "needs_approval"  # a reviewer must decide


ExpiryAction = Literal["reject", "approve"]


class ApprovalBatch(_Frozen):
    """Every statement of one approval cycle, categorised; the reviewer decides ``pending``."""

    batch_id: str = Field(description="Unique id of the batch (batch_<uuid4 hex>)")
    run_id: str = Field(description="The run the batch belongs to")
    cycle: int = Field(ge=1, description="1 for the first approval of a run, +1 per re-approval")
    created_at: datetime = Field(description="When the batch was opened")
    deadline: datetime | None = Field(default=None, description="When the expiry action applies")
    items: list[ApprovalItem] = Field(description="Every item of the cycle, in order")
    categories: dict[str, ItemCategory] = Field(description="call_id -> category")
    notes: dict[str, str] = Field(
        default_factory=dict, description="call_id -> why denied/auto-approved"
    )
    quorum: int = Field(
        default=1, ge=1, description="Distinct reviewers whose votes resolve the batch"
    )
    on_expiry: ExpiryAction = Field(
        default="reject", description="What the deadline does to pending items"
    )
    context: dict[str, Any] = Field(
        default_factory=dict,
        description="What another process needs to review it, e.g. the dialect to validate edits with",
    )
    risk_quorum: dict[str, int] = Field(
        default_factory=dict,
        description="Reviewers per risk level under the rule the batch was opened with: an edit "
        "is re-assessed and the batch needs the quorum of the highest level as it then stands",
    )
    authors: list[str] = Field(
        default_factory=list,
        description="Who wrote or asked for its SQL (the run's asker, an agent that submitted "
        "SQL): never evidence for earned trust, and never a decider under four_eyes",
    )
    four_eyes: bool = Field(
        default=False, description="An author's decision on this batch is refused"
    )

    @model_validator(mode="after")
    def _consistent(self) -> ApprovalBatch:
        ids = [i.call_id for i in self.items]
        if len(set(ids)) != len(ids):
            raise ValueError("call_id values in a batch must be unique")
        if set(ids) != set(self.categories):
            raise ValueError("every item needs exactly one category")
        return self

    def item(self, call_id: str) -> ApprovalItem:
        for item in self.items:
            if item.call_id == call_id:
                return item
        raise KeyError(call_id)

    def _of(self, category: ItemCategory) -> list[ApprovalItem]:
        return [i for i in self.items if self.categories[i.call_id] is category]

    @property
    def pending(self) -> list[ApprovalItem]:
        """The items a reviewer must decide, in batch order."""
        return self._of(ItemCategory.NEEDS_APPROVAL)

    @property
    def denied(self) -> list[ApprovalItem]:
        return self._of(ItemCategory.DENIED)

    @property
    def auto_approved(self) -> list[ApprovalItem]:
        return self._of(ItemCategory.AUTO_APPROVED)

    @property
    def pending_ids(self) -> list[str]:
        return [i.call_id for i in self.pending]


class Approve(_Frozen):
    """Run the statement exactly as shown."""

    action: Literal["approve"] = "approve"


class Reject(_Frozen):
    """Do not run the statement; the reason reaches the result and the answer."""

    action: Literal["reject"] = "reject"
    reason: str = Field(min_length=1, description="Why the statement must not run")

    @field_validator("reason")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a rejection needs a reason")
        return value.strip()


class Edit(_Frozen):
    """Run this SQL instead, once the validator accepts it."""

    action: Literal["edit"] = "edit"
    sql: str = Field(min_length=1, description="The replacement SQL")

    @field_validator("sql")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("an edit needs SQL")
        return value


Decision = Annotated[Approve | Reject | Edit, Field(discriminator="action")]
_DECISION = TypeAdapter(Decision)


def parse_decision(value: Any) -> Approve | Reject | Edit:
    """A decision from a model, ``"approve"``, or a dict such as ``{"action": "edit", "sql": …}``.

    Raises ``ValueError`` (or pydantic's ``ValidationError``, a subclass) when it is none of them.
    """
    if isinstance(value, Approve | Reject | Edit):
        return value
    if isinstance(value, str):
        if value.strip().lower() == "approve":
            return Approve()
        raise ValueError(f"{value!r} is not a decision; use 'approve' or an object with an action")
    return _DECISION.validate_python(value)


ResolutionStatus = Literal["approved", "edited", "rejected", "denied", "auto_approved"]
RUNNABLE_STATUSES: frozenset[str] = frozenset({"approved", "edited", "auto_approved"})


class Resolution(_Frozen):
    """What became of one item: whether it may run, and exactly which text."""

    call_id: str = Field(description="The item's call_id")
    question_id: str = Field(description="The question the item serves")
    status: ResolutionStatus = Field(
        description="approved, edited, rejected, denied or auto_approved"
    )
    sql: str | None = Field(default=None, description="The SQL that may run; None when it may not")
    sql_hash: str | None = Field(default=None, description="sha256 of ``sql``")
    reason: str | None = Field(default=None, description="Why rejected, denied or auto-approved")
    findings: list[ItemFinding] = Field(
        default_factory=list, description="Findings on the SQL that runs"
    )
    edited_from: str | None = Field(default=None, description="The SQL shown before an edit")
    risk: StatementRisk | None = Field(
        default=None, description="The risk of the SQL that may run (an edit's is assessed anew)"
    )

    @property
    def runnable(self) -> bool:
        return self.status in RUNNABLE_STATUSES


BatchStatus = Literal["pending", "resolved", "expired"]


class ApprovalOutcome(_Frozen):
    """The result of one cycle: a resolution per call_id of the batch.

    ``status`` is ``pending`` (with no resolutions) while a quorum still waits for votes.
    """

    batch_id: str
    run_id: str
    cycle: int
    status: BatchStatus = "resolved"
    resolutions: dict[str, Resolution] = Field(description="call_id -> resolution, batch order")
    decided_by: str | None = Field(default=None, description="The actor whose decision resolved it")
    decided_at: datetime | None = None
    reviewed: bool = Field(
        default=False, description="A reviewer was asked (something needed approval)"
    )
    votes: int = Field(default=0, description="Distinct reviewers who voted")
    quorum: int = Field(default=1, description="Votes needed to resolve")

    def runnable(self, call_id: str) -> str:
        """The exact SQL approved for ``call_id``; raises ``NotRunnable`` otherwise.

        The hash recorded at approval is checked again, so only byte-for-byte approved text runs.
        """
        resolution = self.resolutions.get(call_id)
        if resolution is None:
            raise NotRunnable(call_id, f"not an item of batch {self.batch_id}")
        if not resolution.runnable or resolution.sql is None:
            why = f": {resolution.reason}" if resolution.reason else ""
            raise NotRunnable(call_id, f"{resolution.status}, may not run{why}")
        if resolution.sql_hash != sql_hash(resolution.sql):
            raise SqlHashMismatch(call_id, "the SQL differs from the approved text")
        return resolution.sql

    @property
    def runnable_ids(self) -> list[str]:
        return [cid for cid, r in self.resolutions.items() if r.runnable]

    def reasons(self) -> dict[str, str]:
        """call_id -> reason for every item that will not run (rejected or denied)."""
        return {cid: r.reason or r.status for cid, r in self.resolutions.items() if not r.runnable}


#: How a vote was given (``Vote.review``): only ``reviewed`` votes earn a template trust.
VoteReview = Literal["reviewed", "at_client", "unseen"]


class Vote(_Frozen):
    """One reviewer's accepted decision on a batch (a batch with quorum k resolves on k votes)."""

    actor: str = Field(description="The reviewer's identity, from configuration, never the payload")
    decisions: dict[str, Decision] = Field(
        description="call_id -> decision, covering the pending set"
    )
    decision_digest: str = Field(description="sha256 of the decision in canonical form")
    idempotency_key: str | None = None
    at: datetime
    review: VoteReview = Field(
        default="reviewed",
        description="reviewed: a proven reviewer at a review screen (earns trust); at_client: "
        "answered inside an agent's MCP client (a person saw it; earns no trust); unseen: "
        "approved without a look (--yes; teaches nothing)",
    )


class BatchRecord(_Frozen):
    """A batch as the store holds it: the state machine around one ``ApprovalBatch``."""

    batch: ApprovalBatch
    status: BatchStatus = "pending"
    version: int = Field(default=1, ge=1, description="Bumped by every state change")
    outcome: ApprovalOutcome | None = None
    idempotency_key: str | None = None
    decision_digest: str | None = Field(default=None, description="sha256 of the accepted decision")
    votes: list[Vote] = Field(default_factory=list, description="Accepted votes, in order")

    @property
    def batch_id(self) -> str:
        return self.batch.batch_id


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """One line of a listing: what a reviewer needs to pick a batch, without loading it."""

    batch_id: str
    run_id: str
    cycle: int
    status: str
    version: int
    created_at: datetime
    deadline: datetime | None
    pending: int
    votes: int
    quorum: int
    risk: str | None = None  # the highest risk level among the pending items

    @classmethod
    def of(cls, record: BatchRecord) -> BatchSummary:
        batch = record.batch
        return cls(
            batch_id=batch.batch_id,
            run_id=batch.run_id,
            cycle=batch.cycle,
            status=record.status,
            version=record.version,
            created_at=batch.created_at,
            deadline=batch.deadline,
            pending=len(batch.pending_ids),
            votes=len(record.votes),
            quorum=batch.quorum,
            risk=highest_risk(batch.pending),
        )


def highest_risk(items: Iterable[ApprovalItem]) -> str | None:
    """The highest risk level among ``items`` that carry one (None when none does)."""
    levels = [i.risk.level for i in items if i.risk is not None]
    return max(levels, key=RISK_LEVELS.index) if levels else None


#: ``claimed`` -> ``sent`` -> ``done`` | ``failed``; ``in_doubt`` when its process stopped after
#: ``sent``. ``started`` is a claim recorded before the ledger recorded sending: it may have been
#: sent, so it is treated as ``sent``.
ExecutionState = Literal["claimed", "sent", "started", "done", "failed", "in_doubt"]


class ExecutionRecord(_Frozen):
    """The ledger entry of one approved statement: claimed once, sent at most once, settled once.

    A claim whose process stopped before ``sent`` provably never reached the database: recovery
    releases it, so the statement runs (once) later. One that stopped after ``sent`` becomes
    ``in_doubt``: never re-run silently.
    """

    call_id: str
    batch_id: str
    run_id: str
    sql_hash: str
    state: ExecutionState
    actor: str
    started_at: datetime
    finished_at: datetime | None = None
    detail: str | None = None
    claim: str = Field(
        default="",
        description="This claim's own token: a write tried again after a lost connection that "
        "finds it knows the row is its own (empty on entries written before tokens)",
    )
    sent_at: datetime | None = Field(
        default=None, description="When the statement was handed to the database"
    )


class AuditEvent(_Frozen):
    """One append-only entry of the audit log: every state change, with its actor."""

    seq: int | None = Field(default=None, description="Position in the log, assigned by the store")
    at: datetime
    run_id: str
    batch_id: str
    call_id: str | None = None
    event: str = Field(description="batch_opened, item_resolved, batch_resolved, batch_expired, …")
    actor: str
    detail: dict[str, Any] = Field(default_factory=dict)
