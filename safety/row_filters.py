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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import sqlglot
from sqlglot import exp

from .access import split_entry

if TYPE_CHECKING:
    from .catalog import SchemaCatalog
    from .rules import RuleContext

__all__ = ["RowFilter", "RowFilters", "attributes_named", "filter_rows"]

IdentityValue = str | int | float | bool
_PLACEHOLDER = re.compile(r"\{user\.([A-Za-z_][A-Za-z0-9_]*)\}")


def attributes_named(entries: Iterable[tuple[str, str]]) -> frozenset[str]:
    """The attributes the predicates of ``entries`` (``(table, predicate)``) name.

    Example:
        >>> sorted(attributes_named([("orders", "region = {user.region} AND n < {user.cap}")]))
        ['cap', 'region']
    """
    return frozenset(name for _, template in entries for name in _PLACEHOLDER.findall(template))


@dataclass(frozen=True)
class RowFilter:
    """One table's predicate, bound to the asker (``missing``: attributes it lacks)."""

    schema: str | None
    table: str
    predicate: exp.Expression | None
    missing: tuple[str, ...]


def _literal(value: IdentityValue) -> exp.Expression:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float)):
        return exp.Literal.number(value)
    return exp.Literal.string(str(value))


def _parse(template: str, dialect: str, attributes: list[str]) -> exp.Expression:
    """The predicate with ``{user.x}`` as numbered placeholders (the template is the policy's)."""
    text = _PLACEHOLDER.sub(lambda m: f":sgp{attributes.index(m.group(1))}", template)
    select = sqlglot.parse_one(f"SELECT 1 WHERE {text}", read=dialect)
    where = select.args.get("where")
    if (
        not isinstance(select, exp.Select)
        or where is None
        or any(q is not select for q in select.find_all(exp.Query))
    ):
        raise ValueError(f"{template!r} is not a predicate (no subqueries)")
    if any(c.table for c in where.find_all(exp.Column)):
        raise ValueError(f"{template!r}: name the table's own columns without a qualifier")
    return where.this


class RowFilters:
    """The policy's row filters, parsed against the catalog and bound to one asker."""

    def __init__(
        self,
        entries: Iterable[tuple[str, str]],
        dialect: str,
        catalog: SchemaCatalog | None,
        identity: Mapping[str, IdentityValue] | None,
    ) -> None:
        self.filters: list[RowFilter] = []
        for entry, template in entries:
            parts = split_entry(entry, 2)
            schema, table = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
            attributes = list(dict.fromkeys(_PLACEHOLDER.findall(template)))
            predicate = _parse(template, dialect, attributes)
            columns = catalog.columns(schema, table) if catalog is not None else None
            if columns is not None:
                unknown = {c.name.lower() for c in predicate.find_all(exp.Column)} - set(columns)
                if unknown:
                    raise ValueError(f"rows.{entry}: {table} has no column {sorted(unknown)[0]}")
            known = identity or {}
            missing = tuple(a for a in attributes if a not in known)
            if not missing:
                for node in list(predicate.find_all(exp.Placeholder)):
                    node.replace(_literal(known[attributes[int(node.name[3:])]]))
            self.filters.append(RowFilter(schema, table, None if missing else predicate, missing))

    def __bool__(self) -> bool:
        return bool(self.filters)

    def of(self, schema: str | None, table: str) -> RowFilter | None:
        """The filter of ``schema.table``: every matching entry's predicate, AND-ed."""
        found = [
            f for f in self.filters if f.table == table and (f.schema is None or f.schema == schema)
        ]
        if not found:
            return None
        missing = tuple(dict.fromkeys(m for f in found for m in f.missing))
        predicates = [f.predicate for f in found if f.predicate is not None]
        if missing or not predicates:
            return RowFilter(schema, table, None, missing)
        if len(predicates) == 1:
            return RowFilter(schema, table, predicates[0], ())
        combined = exp.and_(*[exp.Paren(this=p.copy()) for p in predicates])
        return RowFilter(schema, table, cast(exp.Expression, combined), ())


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
    from .rules import where

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
