"""Row filters: the rows of a table an asker may see, injected wherever the table is read.

A policy names a predicate per table, with placeholders for the asker's identity::

    [rows]
    "orders" = "region = {user.region}"

``RowFilters`` parses each predicate once (in the engine's dialect, columns of that table only,
no subqueries) and binds the placeholders to the asker's attributes as literals in the tree
(typed: a number stays a number, text is quoted by the renderer), never by splicing text. An
attribute the predicate needs but the asker lacks makes every statement reading the table
refused (``row_filter_unbound``): fail closed.

``filter_rows`` (a validator rule) replaces every reference to a filtered table (in ``FROM``
and joins, inside subqueries, CTEs and set operations) with ``(SELECT <its columns> FROM table
WHERE <predicate>) AS <alias>``, so nothing outside the filter is read; a view over a filtered
table is refused (``row_filter_view``), since its definition reads the table unfiltered. The
SQL the reviewer approves carries the filters; validated again it renders to itself.

Example:
    >>> from safety import SafetyPolicy, SqlValidator
    >>> policy = SafetyPolicy(row_filters=(("orders", "region = {user.region}"),))
    >>> v = SqlValidator("sqlite", policy, schema={"orders": ["id", "region"]},
    ...                  identity={"region": "EU"})
    >>> v.validate("SELECT id FROM orders AS o").sql
    "SELECT id FROM (SELECT id, region FROM orders WHERE region = 'EU') AS o LIMIT 1001"
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from .node_labels import where
from .row_predicates import IdentityValue, RowFilter, RowFilters, attributes_named

if TYPE_CHECKING:
    from .rule_context import RuleContext

# The filters themselves live in ``safety.row_predicates``; they are named here too, where they
# were first defined.
__all__ = ["IdentityValue", "RowFilter", "RowFilters", "attributes_named", "filter_rows"]


def _wrapper(table: exp.Table, columns: list[str], predicate: exp.Expression) -> exp.Select:
    base = exp.Table(this=table.this.copy(), db=table.args.get("db"))
    return exp.select(*[exp.column(c) for c in columns]).from_(base).where(predicate.copy())


def _filtered_already(table: exp.Table, predicate: exp.Expression, dialect: str) -> bool:
    """True when ``table`` is the only source of a SELECT whose WHERE is exactly ``predicate``
    (whatever it projects, nothing widens the rows it reads)."""
    source = table.parent
    select = source.parent if isinstance(source, exp.From) else None
    if not isinstance(select, exp.Select) or table.args.get("alias") is not None:
        return False
    if select.args.get("joins") or select.args.get("laterals"):
        return False
    condition = select.args.get("where")
    return condition is not None and condition.this.sql(dialect) == predicate.sql(dialect)


def filter_rows(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Every reference to a filtered table reads only the asker's rows."""
    filters = ctx.row_filters
    if filters is None or not filters or ctx.refused:
        return expression
    catalog = ctx.catalog
    if catalog is None:
        ctx.report(
            "schema_unknown", "Row filters need the database schema; validate against a database."
        )
        return expression
    ctes = {c.alias.lower() for c in ctx.of(expression, exp.CTE) if isinstance(c, exp.CTE)}
    changed = False
    for table in list(ctx.of(expression, exp.Table)):
        assert isinstance(table, exp.Table)
        if not isinstance(table.this, exp.Identifier):
            continue
        name = table.name.lower()
        if not table.db and name in ctes:
            continue
        schema = catalog.schema_of(table.db)
        if ctx.names.is_view(schema, name):
            lineage = ctx.views.of(schema, name) if ctx.views is not None else None
            if lineage is None or any(filters.of(s, t) for s, t in lineage.tables):
                ctx.report(
                    "row_filter_view",
                    f"The view {name} {where(table)} reads a table whose rows are filtered for you; "
                    f"read the table itself.",
                    table,
                )
                continue
        found = filters.of(schema, name)
        if found is None:
            continue
        if found.predicate is None:
            ctx.report(
                "row_filter_unbound",
                f"The rows of {name} {where(table)} depend on who asks ({', '.join(found.missing)}), "
                f"which is not known for this request; nothing of it may be read.",
                table,
            )
            continue
        if _filtered_already(table, found.predicate, ctx.dialect):
            continue  # an approved statement validated again: its reference reads only the rows
        shown = catalog.original_columns(schema, name) or []
        real = catalog.columns(schema, name) or []
        default = ctx.default_schema
        columns = [
            c
            for c, r in zip(shown, real, strict=False)
            if ctx.names.column_verdict(schema, name, r, default) is None
        ]
        wrapper = _wrapper(table, columns, found.predicate)
        alias = table.args.get("alias")
        alias = (
            alias.copy()
            if alias is not None
            else exp.TableAlias(this=exp.to_identifier(table.name))
        )
        table.replace(exp.Subquery(this=wrapper, alias=alias))
        changed = True
    if changed:
        ctx.invalidate()
        ctx.report(
            "rows_filtered",
            "Row filters for who asks were added to the tables that have them.",
            expression,
            "rewrite",
        )
    return expression
