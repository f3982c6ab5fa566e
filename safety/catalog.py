"""SchemaCatalog: the real tables and columns of the target database, keyed by ``schema.table``.

The validator takes a schema in one of three shapes and turns it into one catalog, built once:

- flat ``{"users": ["id", "email"]}``: every table lives in the engine's default schema;
- schema-qualified ``{"sales.users": ["id", "email"]}`` (bare keys still mean the default schema);
- nested ``{"sales": {"users": ["id", "email"]}}``.

Names are compared lower-cased; column order is kept (alias column lists ``AS c(a, b)`` and
``SELECT *`` expansion are positional).

Example:
    >>> catalog = SchemaCatalog({"users": ["id", "email"], "sales.users": ["id"]}, "postgres")
    >>> catalog.default_schema, catalog.columns("public", "users"), catalog.columns("sales", "users")
    ('public', ['id', 'email'], ['id'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot.schema import MappingSchema

__all__ = ["DEFAULT_SCHEMAS", "SchemaCatalog", "SchemaInput"]

# The schema an unqualified table name lives in, per engine (MySQL: the URL's database, so none here).
DEFAULT_SCHEMAS: dict[str, str | None] = {
    "sqlite": "main",
    "duckdb": "main",
    "postgres": "public",
    "mysql": None,
}

SchemaInput = Mapping[str, Sequence[str] | Mapping[str, Sequence[str]]]

# Stands for "the default schema" when the engine's is not known (MySQL without a database name).
_UNNAMED = "<default>"


class SchemaCatalog:
    """Tables and their ordered columns, lower-cased, plus the sqlglot schema used to qualify."""

    def __init__(
        self, schema: SchemaInput, dialect: str, default_schema: str | None = None
    ) -> None:
        self.dialect = dialect
        default = default_schema or DEFAULT_SCHEMAS.get(dialect)
        self.default_schema: str | None = default.lower() if default else None
        self._tables: dict[tuple[str, str], list[str]] = {}
        self._original: dict[tuple[str, str], list[str]] = {}
        original: dict[str, dict[str, list[str]]] = {}
        for key, value in schema.items():
            if isinstance(value, Mapping):  # nested {schema: {table: columns}}
                for table, columns in value.items():
                    self._add(original, str(key), str(table), list(columns))
                continue
            parts = str(key).split(".")
            if len(parts) == 1:
                self._add(original, self.default_schema or _UNNAMED, parts[0], list(value))
            else:
                self._add(original, parts[-2], parts[-1], list(value))
        if dialect == "mysql":  # resolution compares MySQL names lower-cased (see safety.resolve)
            original = {
                s.lower(): {t.lower(): [c.lower() for c in cols] for t, cols in tables.items()}
                for s, tables in original.items()
            }
        self.mapping = MappingSchema(
            {
                s: {t: {c: "UNKNOWN" for c in cols} for t, cols in tables.items()}
                for s, tables in original.items()
            },
            dialect=dialect,
        )

    def _add(
        self, original: dict[str, dict[str, list[str]]], schema: str, table: str, columns: list[str]
    ) -> None:
        original.setdefault(schema, {})[table] = [str(c) for c in columns]
        self._tables[(schema.lower(), table.lower())] = [str(c).lower() for c in columns]
        self._original[(schema.lower(), table.lower())] = [str(c) for c in columns]

    @property
    def qualify_db(self) -> str:
        """The schema name given to sqlglot for unqualified tables."""
        return self.default_schema or _UNNAMED

    def schema_of(self, db: str) -> str | None:
        """A resolved table's schema as the policy sees it (None: the unnamed default)."""
        name = db.lower() if db else (self.default_schema or "")
        return None if not name or name == _UNNAMED else name

    def columns(self, schema: str | None, table: str) -> list[str] | None:
        """The ordered, lower-cased columns of ``schema.table``, or None when unknown."""
        return self._tables.get(
            ((schema or self.default_schema or _UNNAMED).lower(), table.lower())
        )

    def original_columns(self, schema: str | None, table: str) -> list[str] | None:
        """The columns of ``schema.table`` as the schema spells them."""
        return self._original.get(
            ((schema or self.default_schema or _UNNAMED).lower(), table.lower())
        )

    def tables(self) -> list[tuple[str, str]]:
        return list(self._tables)
