"""Table and column allowlists / denylists, judged on resolved ``schema.table.column`` names.

Policy entries are ``table`` or ``schema.table`` for tables, and ``column``, ``table.column`` or
``schema.table.column`` for columns, compared lower-cased. The reading is the fail-closed one:

- a **deny** entry without a schema denies that table (or column) in every schema;
- an **allow** entry without a schema allows it only in the engine's default schema
  (``public``, ``main``, the MySQL database), so ``other_schema.allowed_name`` is not allowed;
- a bare column entry applies to that column of every table.

When the schema is known, every reference is resolved against it (see ``safety.resolve``), with
or without rules, so ``SELECT nosuch FROM pets`` is refused (``unresolved_column``); without a
schema, column rules refuse the statement (``schema_unknown``),
since a reference that cannot be resolved cannot be judged. Table rules need no schema; when one
is known, a table outside it is refused (``unresolved_table``).

Example:
    >>> rules = NameRules.from_policy(denied_tables=("audit",), allowed_tables=("users",))
    >>> rules.table_verdict("public", "users", "public"), rules.table_verdict("sales", "users", "public")
    (None, 'table_not_allowed')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from .name_rules import NameRules, split_entry
from .node_labels import where
from .resolve import Resolution, resolve, resolve_tables, sqlite_quoted_strings
from .resolve_fast import GIVE_UP, fast_resolve, needs_full

if TYPE_CHECKING:
    from .rule_context import RuleContext

# ``NameRules`` and ``split_entry`` live in ``safety.name_rules``; they are named here too, where
# they were first defined.
__all__ = ["NameRules", "check_access", "resolve_statement", "split_entry"]


def resolve_statement(expression: exp.Expression, ctx: RuleContext) -> tuple[Resolution, bool]:
    """Every column of ``expression`` followed to its table (``ctx.catalog`` must be known), and
    whether the resolution's nodes are ``expression``'s own (the fast path) rather than a
    qualified copy's."""
    assert ctx.catalog is not None
    if ctx.dialect == "sqlite" and any(
        isinstance(c.this, exp.Identifier) and c.this.quoted for c in ctx.of(expression, exp.Column)
    ):
        if sqlite_quoted_strings(expression, ctx.catalog):
            ctx.invalidate()
    fast = None
    if not needs_full(ctx.of(expression, *GIVE_UP), ctx.of(expression, exp.Star)):
        fast = fast_resolve(expression, ctx.catalog, ctx.dialect, ctx.of(expression, exp.Column))
    if fast is not None:
        return fast, True
    return resolve(expression, ctx.catalog, ctx.dialect), False


def check_access(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Refuse tables and columns outside the policy's allowlists or inside its denylists."""
    rules = ctx.names
    # With the schema known, every reference is resolved, rules or not; catalog tables are not
    # in the schema, so a policy that allows them resolves only when it has rules or asks to.
    resolve_all = (
        ctx.policy.require_resolution
        or bool(ctx.policy.masked_columns)
        or (ctx.catalog is not None and not ctx.policy.allow_system_tables)
    )
    if (rules.empty and not resolve_all) or ctx.refused:
        return expression
    if rules.has_column_rules or resolve_all:
        if ctx.catalog is None:
            ctx.report(
                "schema_unknown",
                "The policy restricts columns, but the database schema is not known, so the columns this "
                "statement reads cannot be resolved; validate against a database.",
                expression,
            )
            return expression
        resolution, _ = resolve_statement(expression, ctx)
    else:
        resolution = resolve_tables(expression, ctx.catalog, ctx.default_schema)
    default = ctx.default_schema
    for table in resolution.tables:
        verdict = rules.table_verdict(table.schema, table.table, default)
        if verdict == "table_denied":
            ctx.report(
                verdict, f"The table {table.shown} {where(table.node)} may not be read.", table.node
            )
        elif verdict in ("view_unreadable", "view_reads_protected"):
            reason = rules.view_reason(table.schema, table.table, default)
            ctx.report(
                verdict,
                f"The view {table.shown} {where(table.node)} may not be read: {reason}.",
                table.node,
            )
        elif verdict is not None:
            ctx.report(
                verdict,
                f"The table {table.shown} {where(table.node)} is not among the tables this query may read.",
                table.node,
            )
    for problem in resolution.problems:
        ctx.report(problem.code, problem.message, problem.node)
    for column in resolution.columns:
        verdict = rules.column_verdict(column.schema, column.table, column.column, default)
        if verdict is not None and rules.is_view(column.schema, column.table):
            ctx.report(
                verdict,
                f"The view column {column.table}.{column.column} {where(column.node)} is derived from "
                f"a column this query may not read; leave it out.",
                column.node,
            )
        elif verdict == "column_denied":
            ctx.report(
                verdict,
                f"The column {column.table}.{column.column} {where(column.node)} is a protected column and "
                f"may not be read; leave it out.",
                column.node,
            )
        elif verdict is not None:
            ctx.report(
                verdict,
                f"The column {column.table}.{column.column} {where(column.node)} is not among the columns "
                f"this query may read.",
                column.node,
            )
    return expression
