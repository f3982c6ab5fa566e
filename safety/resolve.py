"""Semantic resolution: every table and column reference mapped to a real ``schema.table.column``.

The statement is qualified against the real schema with sqlglot's optimizer (``qualify``: CTEs,
derived tables, alias column lists, ``USING``, ``NATURAL``, lateral joins, correlated subqueries
and set operations), on a copy, so the SQL that runs is still rendered from the tree the rules
saw. Each column is then followed through the scopes to the real table it reads; an alias column
list ``users AS c(a, b)`` is mapped back by position. Anything that does not end at a real column
of the catalog is a problem with a code naming the node: fail closed.

Example:
    >>> import sqlglot
    >>> from safety.catalog import SchemaCatalog
    >>> catalog = SchemaCatalog({"users": ["id", "email"]}, "postgres")
    >>> tree = sqlglot.parse_one("SELECT c.b FROM users AS c(a, b)", read="postgres")
    >>> [(c.schema, c.table, c.column) for c in resolve(tree, catalog, "postgres").columns]
    [('public', 'users', 'email')]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from .catalog import SchemaCatalog

__all__ = [
    "Problem",
    "Resolution",
    "ResolvedColumn",
    "ResolvedTable",
    "resolve",
    "resolve_tables",
    "is_output_alias",
    "sqlite_quoted_strings",
]


@dataclass(frozen=True)
class ResolvedTable:
    """A real table read by the statement (``schema`` None: the engine's unnamed default)."""

    schema: str | None
    table: str
    alias: str
    node: exp.Expression

    @property
    def shown(self) -> str:
        name = f"{self.schema}.{self.table}" if self.schema else self.table
        return name if self.alias in ("", self.table) else f"{name} (as {self.alias})"


@dataclass(frozen=True)
class ResolvedColumn:
    """A real column read by the statement, and the reference that reads it."""

    schema: str | None
    table: str
    column: str
    node: exp.Expression

    @property
    def shown(self) -> str:
        return (
            f"{self.schema}.{self.table}.{self.column}"
            if self.schema
            else f"{self.table}.{self.column}"
        )


@dataclass(frozen=True)
class Problem:
    """A reference that could not be resolved: the statement is refused with ``code``."""

    code: str
    message: str
    node: exp.Expression | None = None


@dataclass
class Resolution:
    tables: list[ResolvedTable] = field(default_factory=list)
    columns: list[ResolvedColumn] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _is_real(source: object) -> bool:
    return isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier)


def _table_of(
    source: exp.Table, catalog: SchemaCatalog | None, default: str | None
) -> tuple[str | None, str]:
    if catalog is not None:
        return catalog.schema_of(source.db), source.name.lower()
    return (source.db.lower() or default), source.name.lower()


def resolve_tables(
    expression: exp.Expression, catalog: SchemaCatalog | None, default_schema: str | None
) -> Resolution:
    """Only the real tables (CTE names excluded), without qualifying columns: for table rules."""
    resolution = Resolution()
    for scope in traverse_scope(expression):
        for alias, source in scope.sources.items():
            if not _is_real(source):
                continue
            assert isinstance(source, exp.Table)
            _add_table(resolution, source, alias, catalog, default_schema)
    return resolution


def _add_table(
    resolution: Resolution,
    source: exp.Table,
    alias: str,
    catalog: SchemaCatalog | None,
    default_schema: str | None,
) -> None:
    schema, table = _table_of(source, catalog, default_schema)
    resolution.tables.append(ResolvedTable(schema, table, alias.lower(), source))
    if source.catalog:
        resolution.problems.append(
            Problem(
                "unresolved_table",
                f"The table {source.sql()} names a database catalog ({source.catalog}); only tables of the "
                f"connected database may be read.",
                source,
            )
        )
    elif catalog is not None and catalog.columns(schema, table) is None:
        resolution.problems.append(
            Problem(
                "unresolved_table",
                f"The table {source.sql()} is not in the schema of the database; name an existing table.",
                source,
            )
        )


_QUALIFY_CODES = (
    ("ambiguous", "ambiguous_column"),
    ("unknown table", "unresolved_table"),
    ("could not be resolved", "unresolved_column"),
    ("unknown column", "unresolved_column"),
)


def resolve(expression: exp.Expression, catalog: SchemaCatalog, dialect: str) -> Resolution:
    """Qualify a copy of ``expression`` against ``catalog`` and follow every column to its table."""
    resolution = Resolution()
    copy = expression.copy()
    if dialect == "mysql":
        # MySQL compares column names case-insensitively, quoted or not; sqlglot's MySQL keeps case.
        for identifier in copy.find_all(exp.Identifier):
            identifier.set("this", identifier.name.lower())
    try:
        qualified = qualify(
            copy,
            dialect=dialect,
            schema=catalog.mapping,
            db=catalog.qualify_db,
            quote_identifiers=False,
            identify=False,
            validate_qualify_columns=True,
        )
    except OptimizeError as error:
        text = str(error).split(". Line:")[0]
        code = next((c for key, c in _QUALIFY_CODES if key in text.lower()), "unresolved_reference")
        aliases = {t.alias_or_name.lower() for t in copy.find_all(exp.Table)}
        if (
            code == "unresolved_column"
            and text.split("'")[1:2]
            and text.split("'")[1].lower() in aliases
        ):
            code = "whole_row_reference"  # a bare table name used as a value: the whole row
        resolution = resolve_tables(expression, catalog, None)  # unknown tables named first
        resolution.problems.append(
            Problem(code, f"A reference could not be resolved against the schema: {text}.")
        )
        return resolution
    visited: set[int] = set()
    scopes: dict[int, Scope] = {}
    for scope in traverse_scope(qualified):
        scopes[id(scope.expression)] = scope
        for alias, source in scope.sources.items():
            if _is_real(source):
                assert isinstance(source, exp.Table)
                _add_table(resolution, source, alias, catalog, None)
        for column in scope.columns:
            visited.add(id(column))
            _resolve_column(column, scope, catalog, dialect, resolution)
    for node in qualified.find_all(exp.TableColumn):
        resolution.problems.append(
            Problem(
                "whole_row_reference",
                f"The reference {node.sql(dialect)} reads every column of a table at once; name the "
                f"columns instead.",
                node,
            )
        )
    for column in qualified.find_all(exp.Column):
        if id(column) in visited or column.is_star or _lambda_variable(column):
            continue
        select = column.parent_select
        if is_output_alias(column, select):
            # An output alias (ORDER BY n). Engines differ on whether a name inside an ORDER BY
            # expression means the alias or an input column, so a real column of that name counts.
            _alias_shadowing(column, scopes.get(id(select)), catalog, resolution)
            continue
        resolution.problems.append(
            Problem(
                "unresolved_column",
                f"The reference {column.sql(dialect)} sits where its source cannot be determined.",
                column,
            )
        )
    return resolution


def is_output_alias(column: exp.Column, select: exp.Expr | None) -> bool:
    """True when ``column`` names an output alias of ``select`` from ORDER BY, GROUP BY or HAVING."""
    if column.table or not isinstance(select, exp.Select):
        return False
    clause = column.find_ancestor(exp.Order, exp.Group, exp.Having, exp.Qualify, exp.Select)
    if not isinstance(clause, (exp.Order, exp.Group, exp.Having, exp.Qualify)):
        return False
    if clause.parent is not select:
        return False
    name = column.name.lower()
    return any(isinstance(p, exp.Alias) and p.alias.lower() == name for p in select.expressions)


def _alias_shadowing(
    column: exp.Column, scope: Scope | None, catalog: SchemaCatalog, resolution: Resolution
) -> None:
    name = column.name.lower()
    for source in scope.sources.values() if scope is not None else ():
        if not _is_real(source):
            continue
        assert isinstance(source, exp.Table)
        schema, table = _table_of(source, catalog, None)
        columns = catalog.columns(schema, table) or []
        renamed = [c.lower() for c in source.alias_column_names]
        if name in renamed and renamed.index(name) < len(columns):
            resolution.columns.append(
                ResolvedColumn(schema, table, columns[renamed.index(name)], column)
            )
        elif name in columns[len(renamed) :]:
            resolution.columns.append(ResolvedColumn(schema, table, name, column))


def _lambda_variable(column: exp.Column) -> bool:
    """True when ``column`` is a parameter of a lambda around it, in the same query: a name in a
    subquery inside the lambda's body is that subquery's column, never the parameter (DuckDB
    ``email -> (SELECT max(email) FROM customers)`` must not hide ``customers.email``)."""
    if column.table:
        return False
    parent = column.parent
    while parent is not None:
        if isinstance(parent, exp.Query):
            return False
        if isinstance(parent, exp.Lambda) and column.name in {e.name for e in parent.expressions}:
            return True
        parent = parent.parent
    return False


def _resolve_column(
    column: exp.Column,
    scope: Scope,
    catalog: SchemaCatalog,
    dialect: str,
    resolution: Resolution,
) -> None:
    if column.is_star:
        return
    alias = column.table
    if not alias:
        select = scope.expression
        if is_output_alias(column, select):
            _alias_shadowing(column, scope, catalog, resolution)
            return  # an output alias (ORDER BY n): its expression is resolved where it is defined
        resolution.problems.append(
            Problem(
                "unresolved_column",
                f"The reference {column.sql(dialect)} does not name a column of any table it could read.",
                column,
            )
        )
        return
    current: Scope | None = scope
    source: object = None
    while current is not None:
        if alias in current.sources:
            source = current.sources[alias]
            break
        current = current.parent
    if source is None:
        resolution.problems.append(
            Problem(
                "unresolved_column",
                f"The reference {column.sql(dialect)} names a table ({alias}) that is not in scope.",
                column,
            )
        )
        return
    if not _is_real(source):
        return  # a CTE, derived table or table function: its columns were resolved where it is defined
    assert isinstance(source, exp.Table)
    schema, table = _table_of(source, catalog, None)
    columns = catalog.columns(schema, table)
    name = column.name.lower()
    renamed = [c.lower() for c in source.alias_column_names] if source.args.get("alias") else []
    if renamed and name in renamed:
        index = renamed.index(name)
        real = columns[index] if columns is not None and index < len(columns) else None
    elif (
        columns is not None
        and name in columns
        and (not renamed or columns.index(name) >= len(renamed))
    ):
        real = name
    else:
        real = None
    if real is None:
        resolution.problems.append(
            Problem(
                "unresolved_column",
                f"The reference {column.sql(dialect)} does not name a column of {table}.",
                column,
            )
        )
        return
    resolution.columns.append(ResolvedColumn(schema, table, real, column))


def sqlite_quoted_strings(expression: exp.Expression, catalog: SchemaCatalog) -> int:
    """Turn SQLite's double-quoted "strings" into string literals; returns how many.

    SQLite reads a double-quoted identifier that names nothing as a string (``WHERE x = "Asia"``).
    A quoted, unqualified name that is no column of a table the statement reads and no alias in
    it is rewritten to the literal SQLite would use, so the SQL that runs says so explicitly.
    """
    names: set[str] = set()
    for table in expression.find_all(exp.Table):
        names.update(catalog.columns(catalog.schema_of(table.db), table.name) or ())
        names.update(c.lower() for c in table.alias_column_names)
    for node in expression.find_all(exp.Alias, exp.TableAlias, exp.CTE):
        names.add(node.alias.lower())
        if isinstance(node, exp.TableAlias):
            names.update(c.name.lower() for c in node.columns)
    changed = 0
    for column in list(expression.find_all(exp.Column)):
        identifier = column.this
        if (
            not column.table
            and isinstance(identifier, exp.Identifier)
            and identifier.quoted
            and identifier.name.lower() not in names
        ):
            column.replace(exp.Literal.string(identifier.name))
            changed += 1
    return changed
