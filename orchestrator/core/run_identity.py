"""Which database a run belongs to: its identity, and the fingerprint of the schema it was judged on.

A run is bound to the database it was asked on. The run record carries

- the database's **identity**: its URL normalised and without credentials (no driver, user,
  password or query; the default port written out; a SQLite or DuckDB file as its absolute,
  resolved path), so two spellings of one database agree and two databases never do;
- the **schema fingerprint** of the schema its statements were validated against.

Every path that claims, resumes, recovers or executes a run compares the run's identity with its
own database's first (``check_run_database``): a process serving another database raises
``WrongDatabase`` and leaves the run alone (background pickers skip it silently; the right
process picks it up). A schema that changed since the statements were approved does not refuse
the run: the approved statements are validated again against the current schema, and any that no
longer pass is refused (``schema_changed``) instead of run.

Example:
    >>> database_identity("postgresql+psycopg://ann:s3cret@DB.example:5432/sales?sslmode=require")
    'postgres://db.example:5432/sales'
    >>> database_identity("mysql+pymysql://root@127.0.0.1/shop")
    'mysql://127.0.0.1:3306/shop'
    >>> database_identity("sqlite:////srv/data/shop.db")
    'sqlite:///srv/data/shop.db'
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from orchestrator.core.errors import WrongDatabase

if TYPE_CHECKING:
    from safety import DatabaseSchema

__all__ = ["check_run_database", "database_identity", "schema_fingerprint"]

#: The port a server engine listens on when the URL names none.
_DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306}
#: URL backends that name the same engine (the sqlglot dialect names).
_BACKENDS = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "duckdb": "duckdb",
}
#: File-backed engines: the database is a path.
_FILE_BACKENDS = ("sqlite", "duckdb")


def database_identity(url: str) -> str:
    """The database ``url`` points at, as ``backend://host:port/name`` (servers) or
    ``backend:///absolute/path`` (files): no credentials, driver or options. A relative file
    path is resolved against the current directory (the process that records the run)."""
    parsed = make_url(url)
    backend_name = parsed.get_backend_name().lower()
    backend = _BACKENDS.get(backend_name, backend_name)
    if backend in _FILE_BACKENDS:
        name = parsed.database or ""
        if name in ("", ":memory:") or name.startswith("file:"):
            return f"{backend}://{name or ':memory:'}"
        return f"{backend}://{os.path.realpath(os.path.expanduser(name))}"
    host = (parsed.host or "localhost").lower()
    port = parsed.port or _DEFAULT_PORTS.get(backend)
    where = f"{host}:{port}" if port else host
    return f"{backend}://{where}/{parsed.database or ''}"


def schema_fingerprint(schema: DatabaseSchema) -> str:
    """A short hash of every table and its ordered columns, and the default schema.

    Example:
        >>> from safety import DatabaseSchema
        >>> a = DatabaseSchema(tables={"main.t": ["id", "name"]}, default_schema="main")
        >>> b = DatabaseSchema(tables={"main.t": ["id", "name", "ssn"]}, default_schema="main")
        >>> schema_fingerprint(a) == schema_fingerprint(a), schema_fingerprint(a) == schema_fingerprint(b)
        (True, False)
    """
    shape: dict[str, object] = {
        "default": schema.default_schema,
        "tables": {name.lower(): [c.lower() for c in cols] for name, cols in schema.tables.items()},
    }
    if schema.views:  # a changed view definition changes what its columns read
        shape["views"] = {name.lower(): text for name, text in schema.views.items()}
    body = json.dumps(shape, sort_keys=True)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]


def check_run_database(run_id: str, run_target: str | None, identity: str) -> None:
    """Raise ``WrongDatabase`` unless the run was recorded for the database ``identity``.

    A run with no recorded identity is refused too (fail closed)."""
    if run_target != identity:
        recorded = run_target or "an unrecorded database"
        raise WrongDatabase(
            f"run {run_id} belongs to {recorded}, not to {identity}: nothing was run; "
            "resume it with its own database"
        )
