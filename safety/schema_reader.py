"""Read the real schema of a database in the shape the validator takes.

``read_schema(engine)`` returns ``DatabaseSchema``: ``{"schema.table": [columns in order]}`` for
every table and view the connection can see outside the system catalogs, and the engine's
default schema (``main`` for SQLite, ``current_schema()`` for PostgreSQL and DuckDB, the
connected database for MySQL/MariaDB). Pass both to ``SqlValidator(schema=..., default_schema=...)``
so references resolve against what the engine will really read.

Example:
    >>> import sqlalchemy as sa
    >>> engine = sa.create_engine("sqlite://")
    >>> with engine.begin() as conn:
    ...     _ = conn.exec_driver_sql("CREATE TABLE users (id INTEGER, email TEXT)")
    >>> found = read_schema(engine)
    >>> found.tables, found.default_schema
    ({'main.users': ['id', 'email']}, 'main')
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from .dialects import dialect_for_url

__all__ = ["DatabaseSchema", "read_schema"]

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
            for (name,) in names:
                # The column names of an empty result: read-only connections refuse PRAGMA.
                quoted = '"' + str(name).replace('"', '""') + '"'
                result = conn.exec_driver_sql(f"SELECT * FROM main.{quoted} LIMIT 0")
                tables[f"main.{name}"] = list(result.keys())
                result.close()
            return DatabaseSchema(tables=tables, default_schema="main")
        columns_sql, default_sql = _COLUMNS_SQL[dialect]
        found: dict[str, list[str]] = {}
        for schema, table, column in conn.exec_driver_sql(columns_sql).fetchall():
            if str(schema).lower() in _SYSTEM:
                continue
            found.setdefault(f"{schema}.{table}", []).append(str(column))
        default = conn.exec_driver_sql(default_sql).scalar()
    return DatabaseSchema(tables=found, default_schema=str(default) if default else None)
