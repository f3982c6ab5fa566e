"""Rules follow views: a column rule on a base column holds for every view column derived from it.

A view is read with its definition (``safety.schema_reader``). Its lineage is worked out once,
on first use, by resolving the definition against the same catalog the validator uses:

- each output column (by position, so ``CREATE VIEW v(a, b)`` renames nothing away) maps to the
  base columns its expression reads, through CTEs, subqueries, joins, set operations,
  aggregates and other views, at any depth;
- the view's *rows* map to the base columns its row set depends on (``WHERE``, ``JOIN ... ON``,
  ``GROUP BY``, ``HAVING``, window ``ORDER BY`` with ``LIMIT``...; every projected column as
  well when the view is ``DISTINCT``, a distinct set operation, or unnests a value): reading the
  view at all reads those, so ``SELECT count(*) FROM v`` over ``... WHERE email LIKE 'a%'`` is
  judged like a query that compares ``email``;
- its base tables.

A view whose definition cannot be read, parsed or resolved is *opaque*: it stands in the lineage
as a table of its own, which a policy with rules must name explicitly (``view_unreadable``).

``LineageRules`` is ``NameRules`` with the views folded in, so every rule that asks for a verdict
(``check_access``, ``SELECT *`` expansion, the protected names of ``safety.shapes``) follows
lineage without knowing about views.

Example:
    >>> from safety.catalog import SchemaCatalog
    >>> catalog = SchemaCatalog({"customers": ["id", "email"], "v": ["id", "contact"]}, "sqlite")
    >>> views = ViewLineages({"main.v": "SELECT id, email AS contact FROM customers"}, catalog)
    >>> rules = LineageRules.wrap(NameRules.from_policy(denied_columns=["customers.email"]), views)
    >>> rules.column_verdict("main", "v", "id", "main"), rules.column_verdict("main", "v", "contact", "main")
    (None, 'column_denied')
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.pushdown_projections import pushdown_projections
from sqlglot.optimizer.qualify import qualify

from .catalog import SchemaCatalog
from .name_rules import NameRules
from .resolve import resolve

__all__ = ["LineageRules", "ViewLineage", "ViewLineages", "view_query"]

TableKey = tuple[str | None, str]
BaseColumn = tuple[str | None, str, str]

# Projections that change how many rows there are (one row in, several out).
_SET_RETURNING = tuple(
    getattr(exp, name)
    for name in ("Unnest", "Explode", "ExplodeOuter", "Posexplode", "GenerateSeries")
    if hasattr(exp, name)
)
_SET_RETURNING_NAMES = frozenset(
    {
        "unnest",
        "generate_series",
        "json_array_elements",
        "jsonb_array_elements",
        "json_array_elements_text",
        "jsonb_array_elements_text",
        "json_each",
        "jsonb_each",
        "json_each_text",
        "jsonb_each_text",
        "regexp_split_to_table",
        "string_to_table",
        "regexp_matches",
        "jsonb_object_keys",
        "json_object_keys",
        "range",
    }
)


@dataclass(frozen=True)
class ViewLineage:
    """What a view reads: per output column, for its rows, and its base tables."""

    columns: tuple[frozenset[BaseColumn], ...]
    rows: frozenset[BaseColumn]
    tables: frozenset[TableKey]
    opaque: str | None = None  # why the definition cannot be followed (None: it can)


def view_query(definition: str, dialect: str) -> exp.Expression | None:
    """The query of a view definition (``CREATE VIEW ... AS <query>`` or the bare query)."""
    try:
        parsed = sqlglot.parse(definition, read=dialect)
    except Exception:  # any parser failure makes the view opaque, never accepted
        return None
    statements = [s for s in parsed if s is not None]
    if len(statements) != 1:
        return None
    statement = statements[0]
    if isinstance(statement, exp.Create):
        statement = statement.expression
    return cast(exp.Expression, statement) if isinstance(statement, exp.Query) else None


def _leaves(query: exp.Expression) -> list[exp.Select]:
    """The SELECTs whose projections are the query's output columns (set operations unfolded)."""
    while isinstance(query, exp.Subquery):
        query = query.this
    if isinstance(query, exp.SetOperation):
        return _leaves(query.this) + _leaves(query.expression)
    return [query] if isinstance(query, exp.Select) else []


def _rows_follow_projections(query: exp.Expression, leaves: list[exp.Select]) -> bool:
    """True when the view's row set depends on the projected values themselves."""
    node: exp.Expression = query
    while isinstance(node, exp.Subquery):
        node = node.this
    for op in [node, *node.find_all(exp.SetOperation)]:
        if isinstance(op, (exp.Intersect, exp.Except)) or (
            isinstance(op, exp.SetOperation) and op.args.get("distinct")
        ):
            return True
    for leaf in leaves:
        if leaf.args.get("distinct"):
            return True
        for projection in leaf.expressions:
            if projection.find(*_SET_RETURNING) if _SET_RETURNING else False:
                return True
            if any(
                f.name.lower() in _SET_RETURNING_NAMES for f in projection.find_all(exp.Anonymous)
            ):
                return True
    return False


class ViewLineages:
    """The views of one database and their lineage, worked out on first use and kept.

    Args:
        views: ``"schema.view"`` -> its definition (``CREATE VIEW`` or the bare query), or None
            when the definition could not be read. Their columns are in ``catalog``.
        catalog: every table and view with its ordered columns.
    """

    def __init__(self, views: Mapping[str, str | None], catalog: SchemaCatalog) -> None:
        self.catalog = catalog
        self.dialect = catalog.dialect
        self._definitions: dict[TableKey, str | None] = {}
        for name, definition in views.items():
            parts = str(name).split(".")
            schema = catalog.schema_of(parts[-2] if len(parts) > 1 else "")
            self._definitions[(schema, parts[-1].lower())] = definition
        self._done: dict[TableKey, ViewLineage] = {}
        self._lock = threading.RLock()

    def __bool__(self) -> bool:
        return bool(self._definitions)

    def names(self) -> list[TableKey]:
        return list(self._definitions)

    def _key(self, schema: str | None, table: str) -> TableKey | None:
        key = (schema if schema else self.catalog.schema_of(""), table.lower())
        return key if key in self._definitions else None

    def is_view(self, schema: str | None, table: str) -> bool:
        return self._key(schema, table) is not None

    def of(self, schema: str | None, table: str) -> ViewLineage | None:
        """The lineage of ``schema.table`` when it is a view, else None."""
        key = self._key(schema, table)
        if key is None:
            return None
        with self._lock:
            return self._lineage(key, ())

    def _opaque(self, key: TableKey, reason: str) -> ViewLineage:
        columns = self.catalog.columns(*key) or []
        return ViewLineage(
            columns=tuple(frozenset({(key[0], key[1], c)}) for c in columns),
            rows=frozenset(),
            tables=frozenset({key}),
            opaque=reason,
        )

    def _lineage(self, key: TableKey, active: tuple[TableKey, ...]) -> ViewLineage:
        found = self._done.get(key)
        if found is not None:
            return found
        if key in active:  # the view that started the walk fails, and becomes opaque
            raise RecursionError(f"the view {key[1]} is defined in terms of itself")
        try:
            lineage = self._follow(key, (*active, key))
        except Exception as error:  # any failure to follow the definition: opaque, never open
            lineage = self._opaque(
                key, f"its definition could not be followed ({type(error).__name__})"
            )
        self._done[key] = lineage
        return lineage

    def _follow(self, key: TableKey, active: tuple[TableKey, ...]) -> ViewLineage:
        definition = self._definitions[key]
        if not definition:
            return self._opaque(key, "its definition cannot be read on this connection")
        query = view_query(definition, self.dialect)
        if query is None:
            return self._opaque(key, "its definition is not a query the validator can parse")
        columns = self.catalog.columns(*key) or []
        catalog = self.catalog
        qualified = qualify(
            query.copy(),
            dialect=self.dialect,
            schema=catalog.mapping,
            db=catalog.qualify_db,
            quote_identifiers=False,
            identify=False,
            validate_qualify_columns=True,
        )
        leaves = _leaves(qualified)
        if not leaves or any(len(leaf.expressions) != len(columns) for leaf in leaves):
            return self._opaque(key, "its columns do not match its definition")
        whole = self._read(qualified, active)
        if whole is None:
            return self._opaque(key, "its definition does not resolve against the schema")
        tables, everything = whole
        if _rows_follow_projections(qualified, leaves):
            rows = everything
        else:
            bare = qualified.copy()
            for leaf in _leaves(bare):
                leaf.set(
                    "expressions",
                    [exp.Literal.number(1).as_(f"_c{i}") for i in range(len(columns))],
                )
            found = self._read(bare, active)
            if found is None:
                return self._opaque(key, "its definition does not resolve against the schema")
            rows = found[1]
        per_column: list[frozenset[BaseColumn]] = []
        for position in range(len(columns)):
            one = qualified.copy()
            for leaf in _leaves(one):
                leaf.set("expressions", [leaf.expressions[position]])
            found = self._read(one, active)
            if found is None:
                return self._opaque(key, "its definition does not resolve against the schema")
            per_column.append(found[1] | rows)
        return ViewLineage(columns=tuple(per_column), rows=rows, tables=tables)

    def _read(
        self, query: exp.Expression, active: tuple[TableKey, ...]
    ) -> tuple[frozenset[TableKey], frozenset[BaseColumn]] | None:
        """The base tables and base columns ``query`` reads, other views followed; None when
        some reference does not resolve."""
        try:
            pruned = pushdown_projections(query.copy())
        except Exception:  # keep every projection: more columns counted, never fewer
            pruned = query.copy()
        resolution = resolve(pruned, self.catalog, self.dialect)
        if resolution.problems:
            return None
        tables: set[TableKey] = set()
        columns: set[BaseColumn] = set()
        for table in resolution.tables:
            inner = self._inner(table.schema, table.table, active)
            if inner is None:
                tables.add((table.schema, table.table))
            else:
                tables.update(inner.tables)
                columns.update(inner.rows)
        for column in resolution.columns:
            inner = self._inner(column.schema, column.table, active)
            if inner is None:
                columns.add((column.schema, column.table, column.column))
                continue
            position = (self.catalog.columns(column.schema, column.table) or []).index(
                column.column
            )
            columns.update(inner.columns[position])
            columns.update(inner.rows)
        return frozenset(tables), frozenset(columns)

    def _inner(
        self, schema: str | None, table: str, active: tuple[TableKey, ...]
    ) -> ViewLineage | None:
        key = self._key(schema, table)
        return None if key is None else self._lineage(key, active)


@dataclass(frozen=True)
class LineageRules(NameRules):
    """``NameRules`` whose verdicts on a view are the verdicts on what the view reads.

    - A deny entry on a base table or column holds for every view over it, at any depth; a view
      or view column named in a deny entry is denied too.
    - An allowlist admits a view column whose every base column it admits, and a view whose every
      base table it admits; naming the view (or its column) in the allowlist admits it as well,
      but never past a deny entry.
    - An opaque view must be named explicitly (``view_unreadable`` otherwise).
    """

    views: ViewLineages | None = field(default=None, compare=False)
    #: Base columns shown only through a mask (``safety.masking``): a view column derived from
    #: one, or a view whose rows depend on one, is refused like a denied column.
    masked: frozenset[tuple[str | None, str | None, str]] = frozenset()

    @classmethod
    def wrap(
        cls,
        names: NameRules,
        views: ViewLineages | None,
        masked: frozenset[tuple[str | None, str | None, str]] = frozenset(),
    ) -> NameRules:
        if not views:
            return names
        return cls(
            names.allowed_tables,
            names.denied_tables,
            names.allowed_columns,
            names.denied_columns,
            views,
            masked,
        )

    def _base_column(self, s: str | None, t: str, c: str, default: str | None) -> str | None:
        """The verdict on a base column a view reads: a masked one counts as denied."""
        if any(
            mc == c and (mt is None or mt == t) and (ms is None or ms == s)
            for ms, mt, mc in self.masked
        ):
            return "column_denied"
        return NameRules.column_verdict(self, s, t, c, default)

    def is_view(self, schema: str | None, table: str) -> bool:
        return self.views is not None and self.views.is_view(schema, table)

    def _named(self, schema: str | None, table: str, default: str | None) -> bool:
        """True when an allow entry names this view (as a table, or as the table of a column)."""
        base = NameRules
        if (
            self.allowed_tables is not None
            and base.table_verdict(self, schema, table, default) is None
        ):
            return True
        return any(
            t == table and (s is None or s == schema) for s, t, _ in self.allowed_columns or ()
        )

    def view_reason(self, schema: str | None, table: str, default: str | None) -> str:
        """Why reading the view ``schema.table`` is refused, in words (for messages)."""
        lineage = self.views.of(schema, table) if self.views is not None else None
        if lineage is None:
            return ""
        if lineage.opaque and lineage.tables == frozenset({(schema, table)}):
            return f"its definition cannot be followed ({lineage.opaque}) and the policy does not name it"
        for s, t in sorted(lineage.tables, key=str):
            if NameRules.table_verdict(self, s, t, default):
                return f"it reads the table {t}, which this query may not read"
            inner = self.views.of(s, t) if self.views is not None else None
            if inner is not None and inner.opaque and not self._named(s, t, default):
                return f"it reads the view {t}, whose definition cannot be followed"
        for s, t, c in sorted(lineage.rows, key=str):
            if self._base_column(s, t, c, default):
                return f"its rows depend on {t}.{c}, a column this query may not read"
        return ""

    def table_verdict(self, schema: str | None, table: str, default: str | None) -> str | None:
        own = NameRules.table_verdict(self, schema, table, default)
        lineage = self.views.of(schema, table) if self.views is not None else None
        if lineage is None or own == "table_denied":
            return own
        explicit = self._named(schema, table, default)
        for s, t in lineage.tables:
            verdict = NameRules.table_verdict(self, s, t, default)
            if verdict == "table_denied":
                return verdict
            inner = self.views.of(s, t) if self.views is not None else None
            if inner is not None and inner.opaque and not self._named(s, t, default):
                return "view_unreadable"
            if verdict is not None and not explicit:
                return verdict
        for s, t, c in lineage.rows:
            verdict = self._base_column(s, t, c, default)
            if verdict == "column_denied" or (verdict is not None and not explicit):
                return "view_reads_protected"
        return None

    def column_verdict(
        self, schema: str | None, table: str, column: str, default: str | None
    ) -> str | None:
        own = NameRules.column_verdict(self, schema, table, column, default)
        lineage = self.views.of(schema, table) if self.views is not None else None
        if lineage is None or own == "column_denied":
            return own
        columns = self.views.catalog.columns(schema, table) if self.views is not None else None
        if not columns or column not in columns:
            return own or "column_not_allowed"
        explicit = self.allowed_columns is not None and any(
            c == column and t == table and (s is None or s == schema)
            for s, t, c in self.allowed_columns
        )
        for s, t, c in lineage.columns[columns.index(column)]:
            verdict = self._base_column(s, t, c, default)
            if verdict == "column_denied" or (verdict is not None and not explicit):
                return verdict
        return None
