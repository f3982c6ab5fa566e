"""A statement's risk before review: the planner's estimate, what it reads, and the level.

``RiskAssessor(engine, dialect, policy, schema)`` is the gate's ``assess``: for each statement
the validator accepted it asks the planner (``orchestrator.features.explain``, never running the
statement), resolves the tables and ``table.column`` names read, marks those the policy's
``[risk] sensitive_columns`` names, works out the rows expected (the estimate, bounded by the
statement's LIMIT) and whether the row cap will cut, and raises the level by the ``[risk]``
rules. ``assessor_for(database, policy)`` builds it for an open database (its column resolver
shared by every run on it); ``risk_hooks()`` plugs it into a run (the ``assess`` hook).
``risk_approval(policy)``, the rule of each level for the gate, lives with the gate
(``orchestrator.core.run_gate``) and is re-exported here.

Example:
    >>> from safety import Policy
    >>> rules = Policy.from_toml_text('[risk]\\nhigh_rows = 1000\\nfull_scan = "low"').risk
    >>> level_of(rules, PlanEstimate(rows=5000, full_scans=["orders"]), 5000, [], False)
    ('high', ['about 5000 rows expected (high from 1000)'])
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlalchemy.engine import Engine
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.schema import Schema

from approvals import ApprovalItem, RiskLevel, StatementRisk
from approvals.risk import higher
from orchestrator.core.hooks import RunHooks
from orchestrator.core.run_gate import risk_approval
from orchestrator.features.explain import PlanEstimate, explain
from orchestrator.features.memory.fingerprint import columns_read, resolver_schema
from safety import DatabaseSchema, NameRules, Policy, RiskRules

if TYPE_CHECKING:
    from orchestrator.core.database import TargetDatabase

__all__ = [
    "RiskAssessor",
    "assessor_for",
    "column_resolver",
    "level_of",
    "resolver_for",
    "risk_approval",
    "risk_hooks",
    "risk_without_database",
]

Explain = Callable[[Any, str, str], PlanEstimate]
#: Why an edit decided away from the run's database has no estimate.
_NO_DATABASE = "the run's database was not at hand where the edit was decided (--db)"


Resolver = Schema | Mapping[str, Sequence[str]] | None

#: Column resolvers per open database: (the schema read it was built from, the resolver).
_resolvers: weakref.WeakKeyDictionary[TargetDatabase, tuple[DatabaseSchema, Resolver]] = (
    weakref.WeakKeyDictionary()
)
_resolvers_lock = threading.Lock()


def risk_hooks() -> RunHooks:
    """The run's ``assess`` hook: each statement's risk before review."""
    return RunHooks(assess=assessor_for)


def assessor_for(database: TargetDatabase, policy: Policy | None = None) -> RiskAssessor:
    """The gate's ``assess`` for ``database`` under ``policy`` (default: its base policy): the
    planner's estimate on the read-only engine (never running the statement) and the level by
    the policy's ``[risk]`` rules."""
    chosen = policy or database.policy
    return RiskAssessor(
        database.engine_for(chosen),
        database.dialect,
        chosen,
        database.resolved_schema(),
        resolver=column_resolver(database),
    )


def column_resolver(database: TargetDatabase) -> Resolver:
    """sqlglot's schema of the database's real tables, which resolves the columns a statement
    reads (``columns_read``): built once per schema read and shared by every statement of every
    run, since building it costs as much as the schema is large. The plain mapping when sqlglot
    refuses the schema (a table without columns): no column is then resolved."""
    schema = database.resolved_schema()
    with _resolvers_lock:
        cached = _resolvers.get(database)
        if cached is None or cached[0] is not schema:
            cached = (schema, resolver_for(schema, database.dialect))
            _resolvers[database] = cached
        return cached[1]


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
    the database (``column_resolver``), or built here once when not given.
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
