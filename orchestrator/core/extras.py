"""The optional stacks: which extra installs each, and the one sentence a command says when an
extra it needs is not installed.

The base install serves SQLite (and ``sqlgate demo``); everything else is an extra::

    pip install 'sqlgate[postgres]'   PostgreSQL databases, state database, rate-limit window
    pip install 'sqlgate[mysql]'      MySQL and MariaDB databases
    pip install 'sqlgate[duckdb]'     DuckDB databases
    pip install 'sqlgate[redis]'      the rate-limit window in Redis
    pip install 'sqlgate[server]'     sqlgate serve (FastAPI, uvicorn)
    pip install 'sqlgate[mcp]'        sqlgate mcp
    pip install 'sqlgate[celery]'     sqlgate worker, batch --distributed, resume on workers
    pip install 'sqlgate[eval]'       sqlgate eval --record (VCR.py cassettes) and its pytest fixture
    pip install 'sqlgate[otel]'       OpenTelemetry traces exported by OTLP
    pip install 'sqlgate[all]'        every one of them

Example:
    >>> missing_extra(ModuleNotFoundError("No module named 'psycopg'", name="psycopg"))
    'postgres'
    >>> missing_extra(ValueError("bad")) is None
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from orchestrator.core.errors import MissingExtra

__all__ = [
    "EXTRA_OF_MODULE",
    "INCLUDED_EXTRAS",
    "MissingExtra",
    "install_command",
    "missing_extra",
    "needing",
]

#: The top-level module an extra brings, and that extra.
EXTRA_OF_MODULE = {
    "psycopg": "postgres",
    "psycopg_binary": "postgres",
    "pymysql": "mysql",
    "duckdb": "duckdb",
    "duckdb_engine": "duckdb",
    "redis": "redis",
    "fastapi": "server",
    "uvicorn": "server",
    "starlette": "server",
    "jwt": "server",
    "httpx": "server",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "celery": "celery",
    "kombu": "celery",
    "vcr": "eval",
    "pytest": "eval",
    "opentelemetry": "otel",
}

#: Extras that bring others: a command of the first that misses one of the others names the first.
INCLUDED_EXTRAS = {"mcp": frozenset({"mcp", "server"})}

#: SQLAlchemy's words for a dialect whose plugin did not load (``NoSuchModuleError``).
_DIALECT_EXTRA = {"duckdb": "duckdb", "postgresql": "postgres", "mysql": "mysql"}

T = TypeVar("T")


def install_command(extra: str) -> str:
    """``pip install 'sqlgate[EXTRA]'``."""
    return f"pip install 'sqlgate[{extra}]'"


def missing_extra(exc: BaseException) -> str | None:
    """The extra whose module ``exc`` (or an exception it was raised from) says is missing."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ImportError) and current.name:
            extra = EXTRA_OF_MODULE.get(current.name.split(".")[0])
            if extra is not None:
                return extra
        if type(current).__name__ == "NoSuchModuleError":  # sqlalchemy: a dialect's plugin
            text = str(current)
            for word, extra in _DIALECT_EXTRA.items():
                if f"sqlalchemy.dialects:{word}" in text:
                    return extra
        current = current.__cause__ or current.__context__
    return None


def needing(what: str, load: Callable[[], T], *, extra: str | None = None) -> T:
    """``load()``; when it fails for want of an extra, ``MissingExtra`` saying what needs it.

    ``extra``: the extra of the command itself; a missing module of an extra it brings
    (``INCLUDED_EXTRAS``) is then reported as the command's, so one install is named, not the
    parts one at a time.
    """
    try:
        return load()
    except Exception as exc:
        missing = missing_extra(exc)
        if missing is None:
            raise
        if extra is not None and missing in INCLUDED_EXTRAS.get(extra, frozenset({extra})):
            missing = extra
        raise MissingExtra(what, missing) from exc
