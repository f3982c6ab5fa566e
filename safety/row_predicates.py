"""The policy's row filters, parsed once and bound to one asker: ``RowFilters``.

Each predicate is parsed in the engine's dialect (columns of its table only, no subqueries) and
its ``{user.x}`` placeholders become literals of the asker's attributes in the tree, never text
spliced in. The rule that injects them into a statement is ``safety.row_filters.filter_rows``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import sqlglot
from sqlglot import exp

from .name_rules import split_entry

if TYPE_CHECKING:
    from .catalog import SchemaCatalog

__all__ = ["IdentityValue", "RowFilter", "RowFilters", "attributes_named"]

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
