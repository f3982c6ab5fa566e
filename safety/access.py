"""Table and column allowlists / denylists, enforced after resolving aliases and CTE names.

A column is judged in the scope where it touches a real table: ``u.email`` with ``users AS u``
is ``users.email``; a column read from a CTE or derived table was judged where that CTE read
it. An unqualified column in a scope with several tables is resolved with the schema; when
the schema cannot tell, every candidate table is checked (the conservative reading).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

if TYPE_CHECKING:
    from .rules import RuleContext

__all__ = ["check_access"]


def _names(entries: tuple[str, ...] | None) -> frozenset[str] | None:
    return None if entries is None else frozenset(e.lower() for e in entries)


def _column_listed(entries: frozenset[str], table: str, column: str) -> bool:
    return column in entries or f"{table}.{column}" in entries


def _physical(scope: Scope) -> dict[str, str]:
    """alias -> real table name (lower case) for the real tables this scope reads."""
    return {
        alias.lower(): source.name.lower()
        for alias, source in scope.sources.items()
        if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier)
    }


def _resolve(column: exp.Column, scope: Scope, ctx: RuleContext) -> list[str]:
    """The real tables a column may belong to ([] when it belongs to a CTE/derived table)."""
    alias = column.table.lower()
    current: Scope | None = scope
    while current is not None:
        sources = {k.lower(): v for k, v in current.sources.items()}
        if alias:
            if alias in sources:
                source = sources[alias]
                return [source.name.lower()] if isinstance(source, exp.Table) else []
        else:
            tables = _physical(current)
            derived = [s for s in sources.values() if isinstance(s, Scope)]
            if tables or derived:
                name = column.name.lower()
                if ctx.schema is not None:
                    known = [
                        t
                        for t in tables.values()
                        if name in {c.lower() for c in ctx.schema.get(t, ())}
                    ]
                    if known:
                        return known
                    derived_names = {n.lower() for s in derived for n in s.expression.named_selects}
                    if name in derived_names:
                        return []
                return list(tables.values()) if not derived or len(sources) > len(derived) else []
        current = current.parent
    return []


def check_access(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Refuse tables and columns outside the policy's allowlists or inside its denylists."""
    policy = ctx.policy
    allowed_tables = _names(policy.allowed_tables)
    denied_tables = _names(policy.denied_tables) or frozenset()
    allowed_columns = _names(policy.allowed_columns)
    denied_columns = _names(policy.denied_columns) or frozenset()
    if (
        allowed_tables is None
        and not denied_tables
        and allowed_columns is None
        and not denied_columns
    ):
        return expression
    from .rules import where

    column_rules = allowed_columns is not None or bool(denied_columns)
    for scope in traverse_scope(expression):
        for alias, table in _physical(scope).items():
            node = scope.sources[next(k for k in scope.sources if k.lower() == alias)]
            shown = table if alias == table else f"{table} (as {alias})"
            if table in denied_tables:
                ctx.report(
                    "table_denied", f"The table {shown} {where(node)} may not be read.", node
                )
            elif allowed_tables is not None and table not in allowed_tables:
                ctx.report(
                    "table_not_allowed",
                    f"The table {shown} {where(node)} is not among the tables this query may read "
                    f"({', '.join(sorted(allowed_tables))}).",
                    node,
                )
        if not column_rules:
            continue
        aliases = {k.lower() for k in _physical(scope)}
        for column in scope.columns:
            name = column.name.lower()
            if (
                not column.table
                and name in aliases
                and not _is_schema_column(ctx, _physical(scope)[name], name)
            ):
                ctx.report(
                    "whole_row_reference",
                    f"The reference {column.name} {where(column)} reads every column of a table at once; "
                    f"name the columns instead.",
                    column,
                )
                continue
            for table in _resolve(column, scope, ctx):
                if _column_listed(denied_columns, table, name):
                    ctx.report(
                        "column_denied",
                        f"The column {table}.{column.name} {where(column)} is a protected column and may not be "
                        f"read; leave it out.",
                        column,
                    )
                elif allowed_columns is not None and not _column_listed(
                    allowed_columns, table, name
                ):
                    ctx.report(
                        "column_not_allowed",
                        f"The column {table}.{column.name} {where(column)} is not among the columns this query "
                        f"may read.",
                        column,
                    )
    return expression


def _is_schema_column(ctx: RuleContext, table: str, name: str) -> bool:
    return ctx.schema is not None and name in {c.lower() for c in ctx.schema.get(table, ())}
