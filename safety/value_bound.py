"""Every value bounded at the database: a PostgreSQL row larger than the budget never leaves it.

The result budget (``safety.result_budget``) counts rows as they arrive, but a single value
arrives whole from the driver: ``SELECT repeat('x', 500000000)`` would be received, decoded and
held by sqlgate (1.5 GB, long past the statement timeout) before any count could stop it. So on
PostgreSQL the validator wraps the outermost query, in the statement the reviewer approves::

    SELECT * FROM (<query>) AS sqlgate_rows
    WHERE CASE WHEN PG_COLUMN_SIZE(sqlgate_rows) > <budget>
               THEN CAST(NULLIF('sqlgate: a result row is larger than the result budget',
                                CAST(sqlgate_rows IS NULL AS TEXT)) AS BOOLEAN)
               ELSE TRUE END

The size of each result row (``pg_column_size`` of the row built from the subquery's output,
values decompressed) is measured by the server; a row past the budget makes the statement fail
there with that text (``invalid input syntax for type boolean``), which the executor reports as
``value_over_budget``: nothing of the row is sent. Each value is computed once per row (the
subquery's output is what both the check and the result read), and the check's cost is the
server's, under its ``statement_timeout``. A value the server keeps compressed inline (under
about 2 kB compressed, so at most a few hundred kB of text) may count at its compressed size:
that is the constant the bound allows past the budget.

The wrapper is the validator's own: ``unwrap_value_bound`` (the first rule) removes exactly the
wrapper ``bound_values`` (the last rule) would build around the same query with the same budget,
so an approved statement validates to itself; any other ``sqlgate_rows`` shape is checked like
any SQL (and refused: a whole-row reference, ``SELECT *``).

MySQL/MariaDB need no wrapper: the server itself refuses to build a value larger than
``max_allowed_packet`` (the value becomes NULL with a warning; 16 MiB by default on MariaDB,
64 MiB on MySQL 8) and ``GROUP_CONCAT`` stops at ``group_concat_max_len`` (1 MiB).

Example:
    >>> from safety import SafetyPolicy, SqlValidator
    >>> v = SqlValidator("postgres", SafetyPolicy(max_value_bytes=100))
    >>> bounded = v.validate("SELECT repeat('x', 500) AS x").sql
    >>> bounded.startswith("SELECT * FROM (SELECT REPEAT('x', 500) AS x LIMIT 1001) AS sqlgate_rows")
    True
    >>> v.validate(bounded).sql == bounded
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from sqlglot import exp

if TYPE_CHECKING:
    from .rule_context import RuleContext

__all__ = ["MARKER", "bound_values", "unwrap_value_bound"]

ALIAS = "sqlgate_rows"
#: The text a row past the budget makes PostgreSQL quote in its error.
MARKER = "sqlgate: a result row is larger than the result budget"


def _wrapper(query: exp.Expression, budget: int) -> exp.Select:
    row = exp.column(ALIAS)
    measured = exp.func("pg_column_size", row)
    # NULLIF(marker, <the row is null>) is the marker, but depends on the row: the planner cannot
    # fold it into an error at plan time, and it costs nothing to compute.
    refuse = exp.cast(
        exp.Nullif(
            this=exp.Literal.string(MARKER),
            expression=exp.cast(exp.Is(this=row.copy(), expression=exp.null()), "text"),
        ),
        exp.DataType.build("boolean"),
    )
    check = exp.Case(
        ifs=[
            exp.If(this=exp.GT(this=measured, expression=exp.Literal.number(budget)), true=refuse)
        ],
        default=exp.true(),
    )
    return (
        exp.select(exp.Star())
        .from_(exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(ALIAS))))
        .where(check)
    )


def _applies(ctx: RuleContext) -> int | None:
    budget = ctx.policy.max_value_bytes
    return budget if budget is not None and ctx.dialect == "postgres" else None


def unwrap_value_bound(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """The query inside this validator's own value-bound wrapper (exactly it), else unchanged."""
    budget = _applies(ctx)
    if budget is None or not isinstance(expression, exp.Select):
        return expression
    source = expression.args.get("from_") or expression.args.get("from")
    inner = source.this if isinstance(source, exp.From) else None
    if not isinstance(inner, exp.Subquery) or not isinstance(inner.this, exp.Query):
        return expression
    query = cast(exp.Expression, inner.this)
    # Judged on the text that would run: exactly the wrapper this rule set builds, or nothing.
    if expression.sql("postgres") == _wrapper(query.copy(), budget).sql("postgres"):
        ctx.invalidate()
        return query.pop()
    return expression


def bound_values(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Wrap the outermost query so the server refuses any row larger than the budget."""
    budget = _applies(ctx)
    if budget is None or ctx.refused:
        return expression
    ctx.invalidate()
    return _wrapper(expression, budget)
