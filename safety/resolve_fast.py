"""The common case of resolution, without qualifying a copy: plain scopes, plain column references.

Most analyst SQL is tables, aliases, joins with ``ON``, CTEs, subqueries and set operations, and
every column in it can be followed to its table by walking sqlglot's scopes directly, which costs
a fraction of ``qualify`` on a copy. ``fast_resolve`` does exactly that and gives up (returns
None) at the first thing it does not handle with certainty: alias column lists, ``USING`` or
``NATURAL`` joins, lateral joins, table functions, stars, dotted or lambda references, a name
that is ambiguous, unknown, or a table alias used as a value. The caller then runs the full
``safety.resolve.resolve``, which either resolves or refuses. Giving up is never a verdict, so the
fast path cannot accept anything the full one would refuse; the tests compare both on the corpora.

Example:
    >>> import sqlglot
    >>> from safety.catalog import SchemaCatalog
    >>> catalog = SchemaCatalog({"users": ["id", "email"]}, "postgres")
    >>> tree = sqlglot.parse_one("SELECT u.email FROM users AS u", read="postgres")
    >>> [c.shown for c in fast_resolve(tree, catalog, "postgres", list(tree.find_all(exp.Column))).columns]
    ['public.users.email']
    >>> fast_resolve(sqlglot.parse_one("SELECT c.b FROM users AS c(a, b)", read="postgres"), catalog,
    ...     "postgres", []) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from .catalog import SchemaCatalog
from .resolve import Resolution, ResolvedColumn, ResolvedTable, is_output_alias

__all__ = ["GIVE_UP", "fast_resolve", "needs_full"]

# Nodes whose column semantics the fast path leaves to ``qualify`` (stars: see ``needs_full``).
GIVE_UP: tuple[type[exp.Expression], ...] = tuple(
    getattr(exp, name)
    for name in ("Lateral", "Unnest", "Dot", "Lambda", "Pivot", "Unpivot", "TableColumn")
    if hasattr(exp, name)
)


def needs_full(nodes: Sequence[exp.Expression], stars: Sequence[exp.Expression]) -> bool:
    """True when the tree holds a construct the fast path leaves to the full resolver.

    ``nodes`` are the tree's instances of ``GIVE_UP``; ``stars`` its ``exp.Star`` nodes, of which
    only ``COUNT(*)`` is plain.
    """
    return bool(nodes) or any(
        not (isinstance(star.parent, exp.Count) and star.arg_key == "this") for star in stars
    )


class _GiveUp(Exception):
    pass


def _norm(identifier: exp.Expression | str, dialect: str) -> str:
    if isinstance(identifier, str):
        return identifier.lower()
    name = identifier.name
    if dialect == "postgres" and isinstance(identifier, exp.Identifier) and identifier.quoted:
        return name  # PostgreSQL: a quoted name keeps its case
    return name.lower()


def fast_resolve(
    expression: exp.Expression,
    catalog: SchemaCatalog,
    dialect: str,
    columns: Sequence[exp.Expression],
    has_other: bool = False,
) -> Resolution | None:
    """Resolve plain statements directly on the scopes; None means "use the full resolver".

    ``columns`` is every ``exp.Column`` of the tree (from the rule context's index): each must be
    met in some scope, or the fast path gives up. ``has_other`` says the tree holds one of the
    constructs the fast path does not handle (the caller knows from its index).
    """
    if has_other:
        return None
    try:
        return _resolve(expression, catalog, dialect, columns)
    except _GiveUp:
        return None


def _sources(scope: Scope, dialect: str) -> dict[str, object]:
    named: dict[str, object] = {}
    for alias, source in scope.sources.items():
        key = alias.lower() if dialect != "postgres" else alias
        if key in named:
            raise _GiveUp
        named[key] = source
    return named


def _table_columns(source: exp.Table, catalog: SchemaCatalog) -> tuple[str | None, str, list[str]]:
    if not isinstance(source.this, exp.Identifier) or source.catalog:
        raise _GiveUp  # table functions and catalog-qualified names
    schema = catalog.schema_of(source.db)
    table = source.name.lower()
    columns = catalog.columns(schema, table)
    if columns is None:
        raise _GiveUp  # unknown table: the full resolver names it
    return schema, table, columns


def _outputs(scope: Scope) -> set[str]:
    query = scope.expression
    if not isinstance(query, (exp.Select, exp.SetOperation)):
        raise _GiveUp
    names = query.named_selects
    if not all(names):
        raise _GiveUp
    return {n.lower() for n in names}


def _resolve(
    expression: exp.Expression,
    catalog: SchemaCatalog,
    dialect: str,
    all_columns: Sequence[exp.Expression],
) -> Resolution:
    resolution = Resolution()
    visited: set[int] = set()
    sources_of: dict[int, dict[str, object]] = {}
    for scope in traverse_scope(expression):
        sources = sources_of.setdefault(id(scope), _sources(scope, dialect))
        for join in scope.expression.args.get("joins") or ():
            if join.args.get("using") or join.method:
                raise _GiveUp  # USING / NATURAL compare columns nobody names
        for alias, source in sources.items():
            if isinstance(source, exp.Table):
                if source.args.get("alias") and source.alias_column_names:
                    raise _GiveUp
                schema, table, _ = _table_columns(source, catalog)
                resolution.tables.append(ResolvedTable(schema, table, alias, source))
            elif isinstance(source, Scope):
                alias_node = source.expression.parent
                if isinstance(alias_node, (exp.Subquery, exp.CTE)) and alias_node.args.get("alias"):
                    if alias_node.args["alias"].columns:
                        raise _GiveUp
        for column in scope.columns:
            if id(column) in visited:
                continue  # met first in the inner scope it belongs to (scopes come innermost first)
            visited.add(id(column))
            _column(column, scope, sources_of, catalog, dialect, resolution)
    if any(id(node) not in visited for node in all_columns):
        raise _GiveUp
    return resolution


def _column(
    column: exp.Column,
    scope: Scope,
    sources_of: dict[int, dict[str, object]],
    catalog: SchemaCatalog,
    dialect: str,
    resolution: Resolution,
) -> None:
    if not isinstance(column.this, exp.Identifier) or column.args.get("db"):
        raise _GiveUp
    name = _norm(column.this, dialect)
    current: Scope | None = scope
    while current is not None:
        sources = sources_of.get(id(current))
        if sources is None:
            sources = sources_of.setdefault(id(current), _sources(current, dialect))
        if column.table:
            key = _norm(column.args["table"], dialect)
            if key in sources:
                _record(sources[key], name, column, catalog, resolution)
                return
        else:
            candidates = [s for s in sources.values() if _has(s, name, catalog)]
            if len(candidates) == 1:
                _record(candidates[0], name, column, catalog, resolution)
                return
            if len(candidates) > 1 or name in sources:
                raise _GiveUp  # ambiguous, or a table alias used as a value
            if current is scope and is_output_alias(column, current.expression):
                return  # an output alias (ORDER BY n); no source has a column of that name
        current = current.parent
    raise _GiveUp  # unknown: the full resolver refuses it with its reason


def _has(source: object, name: str, catalog: SchemaCatalog) -> bool:
    if isinstance(source, exp.Table):
        return name in _table_columns(source, catalog)[2]
    if isinstance(source, Scope):
        return name in _outputs(source)
    raise _GiveUp


def _record(
    source: object, name: str, column: exp.Column, catalog: SchemaCatalog, resolution: Resolution
) -> None:
    if isinstance(source, exp.Table):
        schema, table, columns = _table_columns(source, catalog)
        if name not in columns:
            raise _GiveUp
        resolution.columns.append(ResolvedColumn(schema, table, name, column))
        return
    if isinstance(source, Scope):
        if name not in _outputs(source):
            raise _GiveUp
        return  # a CTE or derived table: its own scope resolved what it reads
    raise _GiveUp
