"""A statement's risk before review: the planner's estimate, what it reads, and the level.

``RiskAssessor(engine, dialect, policy, schema)`` is the gate's ``assess``: for each statement
the validator accepted it asks the planner (``orchestrator.features.explain``, never running the
statement), resolves the tables and ``table.column`` names read, marks those the policy's
``[risk] sensitive_columns`` names, works out the rows expected (the estimate, bounded by the
statement's LIMIT) and whether the row cap will cut, and raises the level by the ``[risk]``
rules. ``risk_approval(policy)`` is the rule of each level for the gate.

Example:
    >>> from safety import Policy
    >>> rules = Policy.from_toml_text('[risk]\\nhigh_rows = 1000\\nfull_scan = "low"').risk
    >>> level_of(rules, PlanEstimate(rows=5000, full_scans=["orders"]), 5000, [], False)
    ('high', ['about 5000 rows expected (high from 1000)'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import sqlglot
from sqlalchemy.engine import Engine
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.schema import Schema

from approvals import ApprovalItem, RiskApproval, RiskLevel, StatementRisk
from approvals.risk import higher
from orchestrator.features.explain import PlanEstimate, explain
from orchestrator.features.memory.fingerprint import columns_read, resolver_schema
from safety import DatabaseSchema, NameRules, Policy, RiskRules

__all__ = ["RiskAssessor", "level_of", "resolver_for", "risk_approval", "risk_without_database"]

Explain = Callable[[Any, str, str], PlanEstimate]
#: Why an edit decided away from the run's database has no estimate.
_NO_DATABASE = "the run's database was not at hand where the edit was decided (--db)"


def risk_approval(policy: Policy) -> RiskApproval:
    """The gate's rule per level from the policy's ``[risk]`` section."""
    rules = policy.risk
    return RiskApproval(quorum=rules.quorum.model_dump(), auto_levels=frozenset(rules.auto_approve))


def risk_without_database(context: Mapping[str, object], policy: Policy) -> RiskAssessor:
    """The assessor of a batch's edits where its database is not at hand: the batch's dialect
    and policy, no planner and no schema, so it fails closed (no estimate is the policy's
    ``no_estimate`` level; under sensitive columns, what cannot be resolved is sensitive)."""

    def no_plan(_engine: Engine, _dialect: str, _sql: str) -> PlanEstimate:
        return PlanEstimate(error=_NO_DATABASE)

    dialect = context.get("dialect")
    return RiskAssessor(None, str(dialect) if dialect else "sqlite", policy, explain=no_plan)


class RiskAssessor:
    """``assess(item) -> StatementRisk`` for one database under one policy.

    ``explain`` is the planner seam (``orchestrator.features.explain.explain``); ``schema`` resolves
    column references (None: unresolved references count as possibly sensitive when the policy
    names sensitive columns), through ``resolver``: its sqlglot schema, shared by every run on
    the database (``TargetDatabase.column_resolver``), or built here once when not given.
    """

    def __init__(
        self,
        engine: Engine | None,
        dialect: str,
        policy: Policy,
        schema: DatabaseSchema | None = None,
        *,
        resolver: Schema | Mapping[str, Sequence[str]] | None = None,
        explain: Explain = explain,
    ) -> None:
        self.engine = engine
        self.dialect = dialect
        self.policy = policy
        self.schema = schema
        self._explain = explain
        self._resolver = resolver if resolver is not None else resolver_for(schema, dialect)
        self._sensitive = NameRules.from_policy(denied_columns=policy.risk.sensitive_columns)

    def __call__(self, item: ApprovalItem) -> StatementRisk:
        plan = self._explain(self.engine, self.dialect, item.sql)
        tables, aliases, limit = _reads(item.sql, self.dialect)
        scans = sorted({aliases[s.lower()] for s in plan.full_scans if s.lower() in aliases})
        plan = replace(plan, full_scans=scans)
        _, columns = columns_read(item.sql, self.dialect, self._resolver)
        default = self.schema.default_schema if self.schema else None
        if columns is None:
            sensitive = ["(columns not resolved)"] if self.policy.risk.sensitive_columns else []
        else:
            sensitive = sorted(c for c in columns if self._is_sensitive(c, default))
        rows = plan.rows if limit is None or plan.rows is None else min(plan.rows, limit)
        cap = self.policy.row_cap
        if rows is not None:
            cuts: bool | None = rows > cap
        else:
            cuts = False if limit is not None and limit <= cap else None
        level, reasons = level_of(self.policy.risk, plan, rows, sensitive, cuts)
        return StatementRisk(
            level=level,
            reasons=reasons,
            engine=self.dialect,
            estimate=plan.summary,
            estimate_error=plan.error,
            rows_expected=rows,
            full_scans=plan.full_scans,
            tables=sorted(tables),
            sensitive_columns=sensitive,
            row_cap=cap,
            row_cap_cuts=cuts,
        )

    def _is_sensitive(self, column: str, default: str | None) -> bool:
        table, _, name = column.partition(".")
        return self._sensitive.column_verdict(default, table, name, default) is not None


def resolver_for(
    schema: DatabaseSchema | None, dialect: str
) -> Schema | Mapping[str, Sequence[str]] | None:
    """``columns_read``'s schema of ``schema``: sqlglot's, or the mapping itself when sqlglot
    refuses it (then no column is resolved, and sensitive columns are not ruled out)."""
    if schema is None:
        return None
    plain = {name.split(".")[-1]: cols for name, cols in schema.tables.items()}
    try:
        return resolver_schema(plain, dialect)
    except SqlglotError:
        return plain


def level_of(
    rules: RiskRules,
    plan: PlanEstimate,
    rows: int | None,
    sensitive: list[str],
    cuts: bool | None,
) -> tuple[RiskLevel, list[str]]:
    """The level the ``[risk]`` rules give these facts, and one reason per rule that raised it."""
    level: RiskLevel = "low"
    reasons: list[str] = []

    def raise_to(to: RiskLevel, why: str) -> None:
        nonlocal level
        if to != "low":
            level = higher(level, to)
            reasons.append(why)

    if sensitive:
        raise_to(rules.sensitive, f"reads sensitive {', '.join(sensitive)}")
    if rows is not None and rules.high_rows is not None and rows >= rules.high_rows:
        raise_to("high", f"about {rows} rows expected (high from {rules.high_rows})")
    elif rows is not None and rules.medium_rows is not None and rows >= rules.medium_rows:
        raise_to("medium", f"about {rows} rows expected (medium from {rules.medium_rows})")
    if plan.full_scans:
        raise_to(rules.full_scan, f"full scan of {', '.join(plan.full_scans)}")
    if cuts:
        raise_to(rules.row_cap_cut, "the row cap will cut the result")
    if plan.error is not None:
        # A planner stopped by a bound (time, memory) was handed something costly: high.
        raise_to("high" if plan.stopped else rules.no_estimate, f"no estimate: {plan.error}")
    return level, reasons


def _reads(sql: str, dialect: str) -> tuple[set[str], dict[str, str], int | None]:
    """(tables read, alias or name -> table, the outer LIMIT) of ``sql``."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return set(), {}, None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables: set[str] = set()
    aliases: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if not name or name in ctes:
            continue
        tables.add(name)
        aliases[name] = name
        if table.alias:
            aliases[table.alias.lower()] = name
    limit = None
    clause = tree.args.get("limit")
    if isinstance(clause, exp.Limit) and isinstance(clause.expression, exp.Literal):
        if clause.expression.is_int:
            limit = int(clause.expression.this)
    return tables, aliases, limit
