"""Column masking: a masked column is shown through its mask and used nowhere its value leaks.

``[columns] mask = {"customers.email" = "email", "customers.phone" = "last4", "staff.salary" =
"null"}`` (entries as for ``deny``; a role adds its own). The validator then:

- rewrites every projection of a masked column (``SELECT email``, ``SELECT c.email AS e``, each
  column ``SELECT *`` expands to, in any subquery, CTE or set operation) into the mask, in the
  engine's dialect: ``email`` keeps the first character and the domain (``j***@example.org``),
  ``last4`` the last four characters (``***1234``, or ``***`` when there are four or fewer),
  ``null`` and ``redact`` show NULL and ``***``;
- refuses the column anywhere else (``masked_column_use``): comparisons, ``WHERE``, joins
  (``ON``, ``USING``, ``NATURAL``), ``ORDER BY``, ``GROUP BY``, window clauses and function
  arguments would all tell the hidden part apart;
- except inside an allowed aggregate: ``count(DISTINCT col)`` (``mask_aggregates =
  ["count_distinct"]``, the default; ``[]`` allows none), which tells how many distinct values
  there are, and nothing of them.

A masked value that reaches the output only through its mask is the same on two databases that
differ only in the hidden parts (``tests/safety/test_safety_masking.py`` proves it on twins).
A view column derived from a masked column is refused, not masked (``safety.lineage``).

Example:
    >>> from safety import SafetyPolicy, SqlValidator
    >>> policy = SafetyPolicy(masked_columns=(("users.email", "email"),))
    >>> v = SqlValidator("postgres", policy, schema={"users": ["id", "email"]})
    >>> v.validate("SELECT email FROM users").sql  # doctest: +ELLIPSIS
    "SELECT CASE WHEN POSITION('@' IN CAST(email AS TEXT)) > 0 THEN ... AS email FROM users LIMIT 1001"
    >>> v.validate("SELECT id FROM users WHERE email LIKE 'a%'").refusal.code
    'masked_column_use'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from .access import resolve_statement
from .mask_kinds import MASKS
from .name_rules import ColumnKey, split_entry
from .node_labels import where

if TYPE_CHECKING:
    from .rule_context import RuleContext

__all__ = ["MASKS", "MaskRules", "apply_masks", "mask_expression"]

AGGREGATES = ("count_distinct",)
_STRICTEST_FIRST = ("null", "redact", "last4", "email")


def _text(column: exp.Expression) -> exp.Expression:
    return exp.cast(column, exp.DataType.build("text"))


def mask_expression(kind: str, column: exp.Expression) -> exp.Expression:
    """The mask ``kind`` over ``column`` (a column reference), as a dialect-neutral tree."""
    if kind == "null":
        return exp.null()
    if kind == "redact":
        return exp.Case(
            ifs=[exp.If(this=exp.Is(this=column.copy(), expression=exp.null()), true=exp.null())],
            default=exp.Literal.string("***"),
        )
    text = _text(column.copy())
    if kind == "email":
        at = exp.StrPosition(this=text.copy(), substr=exp.Literal.string("@"))
        shown = exp.Concat(
            expressions=[
                exp.Substring(
                    this=text.copy(), start=exp.Literal.number(1), length=exp.Literal.number(1)
                ),
                exp.Literal.string("***"),
                exp.Substring(this=text.copy(), start=at.copy()),
            ]
        )
        return exp.Case(
            ifs=[exp.If(this=exp.GT(this=at, expression=exp.Literal.number(0)), true=shown)],
            default=exp.Case(
                ifs=[
                    exp.If(this=exp.Is(this=column.copy(), expression=exp.null()), true=exp.null())
                ],
                default=exp.Literal.string("***"),
            ),
        )
    if kind == "last4":
        length = exp.Length(this=text.copy())
        tail = exp.Substring(
            this=text.copy(), start=exp.Sub(this=length.copy(), expression=exp.Literal.number(3))
        )
        return exp.Case(
            ifs=[
                exp.If(
                    this=exp.GT(this=length, expression=exp.Literal.number(4)),
                    true=exp.Concat(expressions=[exp.Literal.string("***"), tail]),
                )
            ],
            default=exp.Case(
                ifs=[
                    exp.If(this=exp.Is(this=column.copy(), expression=exp.null()), true=exp.null())
                ],
                default=exp.Literal.string("***"),
            ),
        )
    raise ValueError(f"unknown mask {kind!r} (expected one of {', '.join(MASKS)})")


@dataclass(frozen=True)
class MaskRules:
    """The policy's masks, parsed once: ``(schema, table, column) -> kind``."""

    masks: tuple[tuple[ColumnKey, str], ...]
    aggregates: frozenset[str]

    @classmethod
    def from_policy(
        cls, entries: Iterable[tuple[str, str]], aggregates: Iterable[str] = AGGREGATES
    ) -> MaskRules:
        parsed: list[tuple[ColumnKey, str]] = []
        for entry, kind in entries:
            if kind not in MASKS:
                raise ValueError(f"{kind!r} is not a mask (expected one of {', '.join(MASKS)})")
            parts = split_entry(entry, 3)
            padded = (None,) * (3 - len(parts)) + parts
            parsed.append(((padded[0], padded[1], padded[2]), kind))  # type: ignore[arg-type]
        return cls(tuple(parsed), frozenset(aggregates))

    def kind(self, schema: str | None, table: str, column: str) -> str | None:
        """The mask of ``schema.table.column`` (the strictest when several entries match)."""
        found = [
            k
            for (s, t, c), k in self.masks
            if c == column and (t is None or t == table) and (s is None or s == schema)
        ]
        if not found:
            return None
        return min(found, key=_STRICTEST_FIRST.index)


def _projection_root(column: exp.Column) -> exp.Expr | None:
    """The select-list item ``column`` stands in (itself or an alias of it), else None."""
    node: exp.Expr = column
    while node.parent is not None:
        parent = node.parent
        if isinstance(parent, exp.Select) and node.arg_key == "expressions":
            return node
        node = parent
        if isinstance(node, exp.Query):
            return None
    return None


def _allowed_aggregate(column: exp.Column, rules: MaskRules) -> bool:
    parent = column.parent
    return (
        "count_distinct" in rules.aggregates
        and isinstance(parent, exp.Distinct)
        and len(parent.expressions) == 1
        and isinstance(parent.parent, exp.Count)
    )


def apply_masks(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Mask each projection of a masked column; refuse it where its value would leak."""
    policy = ctx.policy
    if not policy.masked_columns or ctx.refused or ctx.catalog is None:
        return expression
    rules = MaskRules.from_policy(policy.masked_columns, policy.mask_aggregates)
    resolution, exact = resolve_statement(expression, ctx)
    if resolution.problems:
        return expression  # check_access refused it already
    by_node: dict[int, str] = {}
    by_name: dict[str, str] = {}
    for resolved in resolution.columns:
        kind = rules.kind(resolved.schema, resolved.table, resolved.column)
        if kind is None:
            continue
        by_node[id(resolved.node)] = kind
        name = resolved.node.name.lower()
        by_name[name] = min((by_name.get(name, kind), kind), key=_STRICTEST_FIRST.index)
    if not by_node:
        return expression
    for join in ctx.of(expression, exp.Join):
        using = [i.name.lower() for i in join.args.get("using") or ()]
        if join.args.get("method") or any(name in by_name for name in using):
            ctx.report(
                "masked_column_use",
                f"The join {where(join)} compares a masked column ({', '.join(sorted(by_name))}); "
                f"join on other columns.",
                join,
            )
    changed = False
    for column in list(ctx.of(expression, exp.Column)):
        assert isinstance(column, exp.Column)
        kind = by_node.get(id(column)) if exact else by_name.get(column.name.lower())
        if kind is None:
            continue
        if _allowed_aggregate(column, rules):
            continue
        root = _projection_root(column)
        shown = f"{column.table + '.' if column.table else ''}{column.name}"
        if root is None:
            ctx.report(
                "masked_column_use",
                f"The masked column {shown} {where(column)} is used where its hidden value "
                f"would tell (a comparison, join, ordering, grouping or function); it may only be "
                f"selected as it is (shown masked) or counted with count(DISTINCT ...).",
                column,
            )
            continue
        bare = root.this if isinstance(root, exp.Alias) else root
        if bare is column:
            masked = mask_expression(kind, column.copy())
            if isinstance(root, exp.Alias):
                column.replace(masked)
            else:
                column.replace(exp.alias_(masked, column.name))
            changed = True
            continue
        if bare.sql(ctx.dialect) == mask_expression(kind, column.copy()).sql(ctx.dialect):
            continue  # masked already: an approved statement validated again
        ctx.report(
            "masked_column_use",
            f"The masked column {shown} {where(column)} is used inside an expression; select it "
            f"as it is (it is shown masked).",
            column,
        )
    if changed:
        ctx.invalidate()
        ctx.report(
            "column_masked",
            f"Masked columns ({', '.join(sorted(by_name))}) are shown through their masks.",
            expression,
            "rewrite",
        )
    return expression
