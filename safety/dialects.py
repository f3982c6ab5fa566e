"""The one place where a database URL becomes a sqlglot dialect name."""

from __future__ import annotations

from .errors import UnsupportedDialect

__all__ = ["DIALECTS", "check_dialect", "dialect_for_url"]

DIALECTS: tuple[str, ...] = ("duckdb", "mysql", "postgres", "sqlite")

_BACKENDS = {
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "duckdb": "duckdb",
}


def dialect_for_url(url: str) -> str:
    """The sqlglot dialect name for a SQLAlchemy database URL.

    Example:
        >>> dialect_for_url("postgresql+psycopg://u@h/db")
        'postgres'
        >>> dialect_for_url("mariadb+pymysql://u@h/db")
        'mysql'
    """
    scheme = str(url).split(":", 1)[0].lower()
    backend = scheme.split("+", 1)[0]
    try:
        return _BACKENDS[backend]
    except KeyError:
        raise UnsupportedDialect(
            f"no read-only support for database URL scheme {scheme!r}; "
            f"supported: sqlite, postgresql, mysql, mariadb, duckdb"
        ) from None


def check_dialect(dialect: str) -> str:
    """Return ``dialect`` if sqlgate supports it, else raise ``UnsupportedDialect``."""
    if dialect not in DIALECTS:
        raise UnsupportedDialect(
            f"unsupported dialect {dialect!r}; expected one of {', '.join(DIALECTS)}"
        )
    return dialect
