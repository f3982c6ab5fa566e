"""Explicit auto-approval: which statements may skip the reviewer. Off unless configured.

A policy is any callable ``policy(item) -> str | bool | None``: a truthy answer auto-approves
the item (a string says why, for the audit log). ``AutoApprovePolicy`` is the one provided:
read-only statements over allowlisted tables only, with a LIMIT, and no warnings.

Example:
    >>> from approvals.models import ApprovalItem
    >>> policy = AutoApprovePolicy(allowed_tables={"regions"})
    >>> policy(ApprovalItem.new(question_id="q", question="?", sql="SELECT name FROM regions LIMIT 5"))
    'auto-approved: tables regions allowlisted, LIMIT 5'
    >>> policy(ApprovalItem.new(question_id="q", question="?", sql="SELECT name FROM customers LIMIT 5")) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

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
