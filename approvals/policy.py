"""Explicit auto-approval: which statements may skip the reviewer. Off unless configured.

A policy is any callable ``policy(item) -> str | bool | None``: a truthy answer auto-approves
the item (a string says why, for the audit log). Two are provided:

- ``AutoApprovePolicy``: read-only statements over allowlisted tables only, with a LIMIT, and
  no warnings (a static rule).
- ``EarnedAutoApproval``: a statement whose *template* was approved often enough, by enough
  distinct reviewers, recently, on the same schema and policy, never rejected or revoked since,
  which reads no column those approvals did not read, and whose values stay inside what they
  approved (``approvals.envelope``: a LIMIT never above the reviewed one, numbers within the
  reviewed range, strings among the reviewed ones). The evidence (which approvals, by
  whom) is the reason, so it lands in the audit log with the item.

Example:
    >>> from approvals.models import ApprovalItem
    >>> policy = AutoApprovePolicy(allowed_tables={"regions"})
    >>> policy(ApprovalItem.new(question_id="q", question="?", sql="SELECT name FROM regions LIMIT 5"))
    'auto-approved: tables regions allowlisted, LIMIT 5'
    >>> policy(ApprovalItem.new(question_id="q", question="?", sql="SELECT name FROM customers LIMIT 5")) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

import sqlglot
from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp
from sqlglot.errors import SqlglotError

from .envelope import LiteralValue, envelope_text, outside_envelope
from .models import ApprovalItem

Policy = Callable[[ApprovalItem], "str | bool | None"]


@dataclass(frozen=True)
class AutoApprovePolicy:
    """Auto-approve a statement when every table it reads is allowlisted.

    ``require_limit``: the outermost query must carry a LIMIT. ``allow_warnings``: items whose
    findings include a warning or an error still go to the reviewer unless this is True.
    """

    allowed_tables: Iterable[str] = field(default_factory=frozenset)
    require_limit: bool = True
    allow_warnings: bool = False
    dialect: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "allowed_tables", frozenset(t.lower() for t in self.allowed_tables)
        )

    def __call__(self, item: ApprovalItem) -> str | None:
        if item.refused or not self.allowed_tables:
            return None
        if not self.allow_warnings and any(
            f.severity in ("warning", "error") for f in item.findings
        ):
            return None
        try:
            tree = sqlglot.parse_one(item.sql, read=self.dialect)
        except SqlglotError:
            return None
        if not isinstance(tree, exp.Query):
            return None
        cte_names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        tables = {t.name.lower() for t in tree.find_all(exp.Table)} - cte_names
        if not tables or not tables.issubset(self.allowed_tables):
            return None
        limit = tree.args.get("limit")
        if self.require_limit and limit is None:
            return None
        why = f"auto-approved: tables {', '.join(sorted(tables))} allowlisted"
        if limit is not None and limit.expression is not None:
            why += f", LIMIT {limit.expression.sql(dialect=self.dialect)}"
        return why


class EarnedApprovalRule(BaseModel):
    """When reviews earn a template auto-approval (the ``[auto_approval]`` part of a policy file).

    Off by default. Risk, stated plainly: a template approved for some literals is then run for
    any literals of the same shape without a human look (say a filter on another customer).
    """

    model_config = ConfigDict(frozen=True)

    enabled: bool = Field(default=False, description="Earned auto-approval is on")
    min_approvals: int = Field(default=3, ge=1, description="Approvals of the template needed")
    min_reviewers: int = Field(default=2, ge=1, description="Distinct reviewers among them")
    max_age_days: float = Field(default=90.0, gt=0, description="Only approvals this recent count")
    envelope: Literal["limit", "values"] = Field(
        default="limit",
        description="limit: a LIMIT never above the reviewed one; values: also numbers within "
        "the reviewed range and strings among the reviewed ones (approvals.envelope)",
    )


@dataclass(frozen=True)
class ApprovalEvidence:
    """One earlier reviewer approval of a template: a reference for the audit log, who approved
    it, when, and the ``table.column`` names it read (None: unknown, so it cannot vouch)."""

    ref: str
    reviewers: frozenset[str]
    at: datetime
    columns: frozenset[str] | None
    #: The literal values of each approved statement (``approvals.envelope``); None: unknown.
    literals: tuple[tuple[LiteralValue, ...] | None, ...] = ()


class EvidenceSource(Protocol):
    """Where earned auto-approval looks: a statement's template and columns, and the approvals of
    a template on the current schema and policy since a moment (after its latest rejection or
    revocation)."""

    def describe(self, sql: str) -> tuple[str, frozenset[str] | None]: ...

    def literals(self, sql: str) -> tuple[LiteralValue, ...] | None: ...

    def approvals(self, template_id: str, since: datetime) -> Sequence[ApprovalEvidence]: ...


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class EarnedAutoApproval:
    """Auto-approve a statement whose template earned it (see ``EarnedApprovalRule``).

    Fails closed: a refused item, one with warnings, or one whose columns cannot be resolved
    goes to the reviewer.
    """

    rule: EarnedApprovalRule
    evidence: EvidenceSource
    clock: Callable[[], datetime] = _utc_now

    def __call__(self, item: ApprovalItem) -> str | None:
        rule = self.rule
        if not rule.enabled or item.refused:
            return None
        if any(f.severity in ("warning", "error") for f in item.findings):
            return None
        template, columns = self.evidence.describe(item.sql)
        if columns is None:
            return None
        since = self.clock() - timedelta(days=rule.max_age_days)
        usable = [a for a in self.evidence.approvals(template, since) if a.columns is not None]
        reviewers = frozenset().union(*(a.reviewers for a in usable))
        if len(usable) < rule.min_approvals or len(reviewers) < rule.min_reviewers:
            return None
        read = frozenset[str]().union(*(a.columns or frozenset() for a in usable))
        if not columns <= read:
            return None
        # the envelope: values within what the approvals saw (LIMIT never above the reviewed)
        seen = [literals for a in usable for literals in a.literals or (None,)]
        stated = self.evidence.literals(item.sql)
        if outside_envelope(stated, seen, values=rule.envelope == "values") is not None:
            return None
        return (
            f"earned auto-approval: template {template} approved {len(usable)} time(s) by "
            f"{', '.join(sorted(reviewers))} since {since:%Y-%m-%d}, within the reviewed values "
            f"({envelope_text(seen, values=rule.envelope == 'values')}); evidence: {', '.join(a.ref for a in usable)}"
        )
