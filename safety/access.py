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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from .resolve import Resolution, resolve, resolve_tables, sqlite_quoted_strings
from .resolve_fast import GIVE_UP, fast_resolve, needs_full

if TYPE_CHECKING:
    from .rules import RuleContext

__all__ = ["NameRules", "check_access", "resolve_statement", "split_entry"]

TableKey = tuple[str | None, str]
ColumnKey = tuple[str | None, str | None, str]


def split_entry(entry: str, most: int) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``, lower-cased; ValueError for empty parts or more than ``most``.

    Example:
        >>> split_entry("Public.Users.Email", 3)
        ('public', 'users', 'email')
    """
    parts = tuple(p.strip().strip('"`').lower() for p in str(entry).split("."))
    if not all(parts) or len(parts) > most:
        shape = (
            "table or schema.table" if most == 2 else "column, table.column or schema.table.column"
        )
        raise ValueError(f"{entry!r} is not a valid entry (expected {shape})")
    return parts


def _tables(entries: Iterable[str]) -> frozenset[TableKey]:
    keys: set[TableKey] = set()
    for entry in entries:
        parts = split_entry(entry, 2)
        keys.add((parts[0], parts[1]) if len(parts) == 2 else (None, parts[0]))
    return frozenset(keys)


def _columns(entries: Iterable[str]) -> frozenset[ColumnKey]:
    keys: set[ColumnKey] = set()
    for entry in entries:
        parts = split_entry(entry, 3)
        padded = (None,) * (3 - len(parts)) + parts
        keys.add((padded[0], padded[1], padded[2]))  # type: ignore[arg-type]
    return frozenset(keys)


def _schema_matches(entry: str | None, actual: str | None, default: str | None, deny: bool) -> bool:
    if entry is None:
        return deny or actual is None or actual == default
    if actual is None:
        return deny  # the table's schema is unknown: a qualified deny entry still counts
    return entry == actual


@dataclass(frozen=True)
class NameRules:
    """The policy's table and column lists, parsed once per validator."""

    allowed_tables: frozenset[TableKey] | None
    denied_tables: frozenset[TableKey]
    allowed_columns: frozenset[ColumnKey] | None
    denied_columns: frozenset[ColumnKey]

    @classmethod
    def from_policy(
        cls,
        allowed_tables: Iterable[str] | None = None,
        denied_tables: Iterable[str] = (),
        allowed_columns: Iterable[str] | None = None,
        denied_columns: Iterable[str] = (),
    ) -> NameRules:
        return cls(
            None if allowed_tables is None else _tables(allowed_tables),
            _tables(denied_tables),
            None if allowed_columns is None else _columns(allowed_columns),
            _columns(denied_columns),
        )

    @property
    def empty(self) -> bool:
        return not self.has_table_rules and not self.has_column_rules

    @property
    def has_table_rules(self) -> bool:
        return self.allowed_tables is not None or bool(self.denied_tables)

    @property
    def has_column_rules(self) -> bool:
        return self.allowed_columns is not None or bool(self.denied_columns)

    def is_view(self, schema: str | None, table: str) -> bool:
        """True when ``schema.table`` is a view whose verdicts follow its lineage
        (``safety.lineage.LineageRules``); plain name rules know no views."""
        return False

    def view_reason(self, schema: str | None, table: str, default: str | None) -> str:
        """Why reading a view is refused, in words; empty for plain name rules."""
        return ""

    def table_verdict(self, schema: str | None, table: str, default: str | None) -> str | None:
        """None when ``schema.table`` may be read, else ``table_denied`` / ``table_not_allowed``."""
        if any(
            t == table and _schema_matches(s, schema, default, True) for s, t in self.denied_tables
        ):
            return "table_denied"
        if self.allowed_tables is not None and not any(
            t == table and _schema_matches(s, schema, default, False)
            for s, t in self.allowed_tables
        ):
            return "table_not_allowed"
        return None

    def column_verdict(
        self, schema: str | None, table: str, column: str, default: str | None
    ) -> str | None:
        """None when the column may be read, else ``column_denied`` / ``column_not_allowed``."""

        def listed(entries: frozenset[ColumnKey], deny: bool) -> bool:
            return any(
                c == column
                and (t is None or (t == table and _schema_matches(s, schema, default, deny)))
                for s, t, c in entries
            )

        if listed(self.denied_columns, True):
            return "column_denied"
        if self.allowed_columns is not None and not listed(self.allowed_columns, False):
            return "column_not_allowed"
        return None


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
    from .rules import where

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
