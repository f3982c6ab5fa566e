"""Read the real schema of a database in the shape the validator takes.

``read_schema(engine)`` returns ``DatabaseSchema``: ``{"schema.table": [columns in order]}`` for
every table and view the connection can see outside the system catalogs, and the engine's
default schema (``main`` for SQLite, ``current_schema()`` for PostgreSQL and DuckDB, the
connected database for MySQL/MariaDB), and the definitions of the views (and PostgreSQL
materialized views) among those tables. Pass all three to
``SqlValidator(schema=..., default_schema=..., views=...)`` so references resolve against what the
engine will really read, and rules follow what each view reads (``safety.lineage``). A view
whose definition the connection may not read is listed with None: the validator then treats it
as a table the policy must name.

Example:
    >>> import sqlalchemy as sa
    >>> engine = sa.create_engine("sqlite://")
    >>> with engine.begin() as conn:
    ...     _ = conn.exec_driver_sql("CREATE TABLE users (id INTEGER, email TEXT)")
    ...     _ = conn.exec_driver_sql("CREATE VIEW names AS SELECT id FROM users")
    >>> found = read_schema(engine)
    >>> found.tables, found.default_schema
    ({'main.names': ['id'], 'main.users': ['id', 'email']}, 'main')
    >>> found.views
    {'main.names': 'CREATE VIEW names AS SELECT id FROM users'}
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from .dialects import dialect_for_url

__all__ = ["DatabaseSchema", "read_schema"]

# "schema.view" -> definition, per engine (SQLite reads sqlite_master below).
_VIEWS_SQL = {
    "postgres": "SELECT n.nspname, c.relname, pg_get_viewdef(c.oid) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('v', 'm') "
    "AND n.nspname NOT IN ('information_schema', 'pg_catalog', 'pg_toast') "
    "AND n.nspname NOT LIKE 'pg_temp%%'",
    "mysql": "SELECT table_schema, table_name, view_definition FROM information_schema.views "
    "WHERE table_schema = DATABASE()",
    "duckdb": "SELECT schema_name, view_name, sql FROM duckdb_views() "
    "WHERE NOT internal AND database_name = current_database()",
}
# information_schema.columns leaves PostgreSQL's materialized views out.
_MATVIEW_COLUMNS_SQL = (
    "SELECT n.nspname, c.relname, a.attname FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_attribute a ON a.attrelid = c.oid "
    "WHERE c.relkind = 'm' AND a.attnum > 0 AND NOT a.attisdropped "
    "AND n.nspname NOT IN ('information_schema', 'pg_catalog', 'pg_toast') "
    "ORDER BY n.nspname, c.relname, a.attnum"
)

_SYSTEM = ("information_schema", "pg_catalog", "pg_toast", "mysql", "performance_schema", "sys")

_COLUMNS_SQL = {
    "postgres": (
        "SELECT table_schema, table_name, column_name FROM information_schema.columns "
        "WHERE table_schema NOT IN ('information_schema', 'pg_catalog', 'pg_toast') "
        "AND table_schema NOT LIKE 'pg_temp%%' "
        "ORDER BY table_schema, table_name, ordinal_position",
        "SELECT current_schema()",
    ),
    "mysql": (
        "SELECT table_schema, table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = DATABASE() ORDER BY table_schema, table_name, ordinal_position",
        "SELECT DATABASE()",
    ),
    "duckdb": (
        "SELECT table_schema, table_name, column_name FROM information_schema.columns "
        "WHERE table_catalog = current_database() "
        "ORDER BY table_schema, table_name, ordinal_position",
        "SELECT current_schema()",
    ),
}


class DatabaseSchema(BaseModel):
    """The tables and columns a validator resolves against, and the engine's default schema."""

    tables: dict[str, list[str]] = Field(
        description='"schema.table" -> its columns, in table order.'
    )
    default_schema: str | None = Field(
        description="The schema an unqualified table name lives in (None when the engine has none)."
    )
    views: dict[str, str | None] = Field(
        default_factory=dict,
        description='"schema.view" -> its definition (CREATE VIEW or the bare query), None when '
        "the connection may not read it. Views are in ``tables`` too, with their columns.",
    )


def read_schema(engine: Engine) -> DatabaseSchema:
    """Tables, views and their ordered columns, outside the system catalogs."""
    dialect = dialect_for_url(str(engine.url))
    with engine.connect() as conn:
        if dialect == "sqlite":
            names = conn.exec_driver_sql(
                "SELECT name FROM main.sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
            tables: dict[str, list[str]] = {}
            views: dict[str, str | None] = {
                f"main.{name}": (str(sql) if sql else None)
                for name, sql in conn.exec_driver_sql(
                    "SELECT name, sql FROM main.sqlite_master WHERE type = 'view'"
                ).fetchall()
            }
            for (name,) in names:
                # The column names of an empty result: read-only connections refuse PRAGMA.
                quoted = '"' + str(name).replace('"', '""') + '"'
                result = conn.exec_driver_sql(f"SELECT * FROM main.{quoted} LIMIT 0")
                tables[f"main.{name}"] = list(result.keys())
                result.close()
            return DatabaseSchema(tables=tables, default_schema="main", views=views)
        columns_sql, default_sql = _COLUMNS_SQL[dialect]
        found: dict[str, list[str]] = {}
        for schema, table, column in conn.exec_driver_sql(columns_sql).fetchall():
            if str(schema).lower() in _SYSTEM:
                continue
            found.setdefault(f"{schema}.{table}", []).append(str(column))
        if dialect == "postgres":
            for schema, table, column in conn.exec_driver_sql(_MATVIEW_COLUMNS_SQL).fetchall():
                found.setdefault(f"{schema}.{table}", []).append(str(column))
        views = {}
        for schema, table, definition in conn.exec_driver_sql(_VIEWS_SQL[dialect]).fetchall():
            name = f"{schema}.{table}"
            if name in found:
                views[name] = (str(definition).strip() or None) if definition else None
        default = conn.exec_driver_sql(default_sql).scalar()
    return DatabaseSchema(
        tables=found, default_schema=str(default) if default else None, views=views
    )
