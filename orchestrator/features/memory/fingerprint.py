"""Fingerprints: the *template* of a statement, the schema it ran on, the policy it was judged by.

A statement's template is its sqlglot AST with every literal replaced by a typed placeholder
(``:num``, ``:str``), every list of literals collapsed to one placeholder, identifiers unquoted
and lower-cased, and table aliases renamed by position; so "top 5 in 2024" and "top 10 in 2025"
share a template, and so do ``orders AS o`` and ``orders AS x``. The template id is a short
sha256 of the rendered template.

Example:
    >>> a = template_of("SELECT name FROM t AS x WHERE year = 2024 LIMIT 5", "sqlite")
    >>> b = template_of('select "NAME" from T as y where YEAR = 2025 limit 10', "sqlite")
    >>> a.template_id == b.template_id, a.text
    (True, 'SELECT name FROM t AS t1 WHERE year = :num LIMIT :num')
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema, Schema

from safety.catalog import SchemaCatalog
from safety.resolve import sqlite_quoted_strings

__all__ = [
    "StatementShape",
    "TemplateFingerprint",
    "columns_read",
    "resolver_schema",
    "policy_fingerprint",
    "schema_fingerprint",
    "shape_of",
    "template_of",
]


@dataclass(frozen=True)
class TemplateFingerprint:
    """A statement's template: its id (16 hex digits) and the normalised text it hashes."""

    template_id: str
    text: str


@dataclass(frozen=True)
class StatementShape:
    """What memory and earned auto-approval need to know about one statement.

    ``columns`` is None when some column could not be resolved to a real table (then no claim
    about what the statement reads is made, and auto-approval fails closed).
    """

    template: TemplateFingerprint
    tables: frozenset[str]
    columns: frozenset[str] | None


def _placeholder(literal: exp.Literal) -> exp.Placeholder:
    return exp.Placeholder(this="str" if literal.is_string else "num")


def _normalise(tree: exp.Expr) -> exp.Expr:
    aliases: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        alias = table.alias
        if alias and alias.lower() not in aliases:
            aliases[alias.lower()] = f"t{len(aliases) + 1}"

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.In) and node.expressions:
            if all(isinstance(e, exp.Literal | exp.Neg) for e in node.expressions):
                node.set("expressions", [exp.Placeholder(this="list")])
            return node
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            return _placeholder(node.this)
        if isinstance(node, exp.Literal):
            return _placeholder(node)
        if isinstance(node, exp.Identifier):
            name = node.name.lower()
            parent = node.parent
            is_table_alias = isinstance(parent, exp.TableAlias) and isinstance(
                parent.parent, exp.Table | exp.Subquery
            )
            is_alias_ref = isinstance(parent, exp.Column) and parent.args.get("table") is node
            if (is_table_alias or is_alias_ref) and name in aliases:
                name = aliases[name]
            return exp.Identifier(this=name, quoted=False)
        return node

    return tree.transform(rewrite, copy=True)


def template_of(sql: str, dialect: str) -> TemplateFingerprint:
    """The template fingerprint of ``sql``; unparseable text gets a fingerprint of its words."""
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
        text = _normalise(tree).sql(dialect=dialect, comments=False)
    except SqlglotError:
        text = " ".join(sql.lower().split())
    return TemplateFingerprint(hashlib.sha256(text.encode()).hexdigest()[:16], text)


def resolver_schema(schema: Mapping[str, Sequence[str]], dialect: str) -> MappingSchema:
    """sqlglot's schema of ``{table: [column, ...]}`` (names lower-cased) for ``columns_read``:
    build it once per database and pass it, rather than the mapping, for every statement."""
    return MappingSchema(
        {t.lower(): {c.lower(): "TEXT" for c in cols} for t, cols in schema.items()},
        dialect=dialect,
    )


def columns_read(
    sql: str, dialect: str, schema: Mapping[str, Sequence[str]] | Schema | None
) -> tuple[frozenset[str], frozenset[str] | None]:
    """(tables, ``table.column`` names) the statement reads, resolved through aliases and CTEs.

    The column set is None when a column cannot be tied to a real table. ``schema`` is the
    mapping, or (cheaper, per statement) its ``resolver_schema``.
    """
    try:
        tree = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return frozenset(), None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = frozenset(
        t.name.lower() for t in tree.find_all(exp.Table) if t.name.lower() not in ctes
    )
    if dialect == "sqlite" and schema and isinstance(tree, exp.Expression) and _quoted_bare(tree):
        # SQLite reads a double-quoted name that is no column as a string ("dog"); the validator
        # reads it so (``safety.resolve.sqlite_quoted_strings``), and so does this. A shared
        # sqlglot schema gives the columns of just the tables read (cheap, per statement).
        local = (
            {t: schema.column_names(exp.to_table(t)) for t in tables}
            if isinstance(schema, Schema)
            else schema
        )
        tree = tree.copy()
        sqlite_quoted_strings(tree, SchemaCatalog(local, dialect))
    try:
        resolver: Schema | None
        if isinstance(schema, Schema):
            resolver = None if schema.empty else schema
        else:  # a mapping sqlglot refuses (a table without columns): nothing is resolved
            resolver = resolver_schema(schema, dialect) if schema else None
        qualified = qualify(
            tree.copy(),
            dialect=dialect,
            schema=resolver,
            identify=False,
            quote_identifiers=False,
            validate_qualify_columns=resolver is not None,
        )
        columns: set[str] = set()
        for scope in traverse_scope(qualified):
            selects = getattr(scope.expression, "named_selects", [])
            outputs = {s.lower() for s in selects}
            for column in scope.columns:
                source = _source(scope, column.table)
                if isinstance(source, exp.Table):
                    columns.add(f"{source.name.lower()}.{column.name.lower()}")
                elif source is None and not (not column.table and column.name.lower() in outputs):
                    return tables, None
    except (SqlglotError, KeyError, ValueError):
        return tables, None
    return tables, frozenset(columns)


def _quoted_bare(tree: exp.Expression) -> bool:
    """Whether the statement has a double-quoted column name without a table (what SQLite may
    read as a string)."""
    return any(
        not c.table and isinstance(c.this, exp.Identifier) and c.this.quoted
        for c in tree.find_all(exp.Column)
    )


def _source(scope: Scope, name: str) -> object:
    """What ``name`` refers to in ``scope``, or in an enclosing one: a correlated subquery's
    reference to an outer table is that table's column, not an unresolved one."""
    current: Scope | None = scope
    while current is not None:
        found = current.sources.get(name)
        if found is not None:
            return found
        current = current.parent
    return None


def shape_of(
    sql: str, dialect: str, schema: Mapping[str, Sequence[str]] | Schema | None = None
) -> StatementShape:
    tables, columns = columns_read(sql, dialect, schema)
    return StatementShape(template_of(sql, dialect), tables, columns)


def _digest(value: object) -> str:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def schema_fingerprint(tables: Mapping[str, Sequence[tuple[str, str]]]) -> str:
    """A short hash of every table's columns and declared types: changes when the schema does."""
    return _digest(
        {t.lower(): sorted((c.lower(), ty.upper()) for c, ty in cols) for t, cols in tables.items()}
    )


def policy_fingerprint(policy: Mapping[str, object]) -> str:
    """A short hash of the safety policy statements were validated under."""
    return _digest(dict(policy))
