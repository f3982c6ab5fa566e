"""Which database a run belongs to: its identity, and the fingerprint of the schema it was judged on.

A run is bound to the database it was asked on. The run record carries

- the database's **identity**: its URL normalised and without credentials (no driver, user,
  password or query; the default port written out; a SQLite or DuckDB file as its absolute,
  resolved path), so two spellings of one database agree and two databases never do;
- the **schema fingerprint** of the schema its statements were validated against;
- the **login** its statements execute as (``DatabaseLogin``): the database user the process
  connects as (read from the server, so ``PGUSER`` or a service file count) and the role it
  switches to (PostgreSQL ``SET ROLE``), if any. Part of what a reviewer approved.

Every path that claims, resumes, recovers or executes a run compares the run's identity with its
own database's first (``check_run_database``), then the login it would execute the run with
(``check_run_login``): a process serving another database, or logging in as another user or
role, raises ``WrongDatabase`` and leaves the run alone (background pickers skip it silently; the right
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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from orchestrator.core.errors import WrongDatabase

if TYPE_CHECKING:
    from safety import DatabaseSchema

__all__ = [
    "DatabaseLogin",
    "check_run_database",
    "check_run_login",
    "database_identity",
    "schema_fingerprint",
]

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


@dataclass(frozen=True)
class DatabaseLogin:
    """Who a run's statements execute as: the database ``user`` the process connects as (empty
    for a database file, which has no logins) and the ``role`` it switches to, if any.

    Example:
        >>> str(DatabaseLogin("app")), str(DatabaseLogin("app", "rls_reader")), str(DatabaseLogin(""))
        ('app', 'app as rls_reader', 'no login (a database file)')
    """

    user: str
    role: str | None = None

    def __str__(self) -> str:
        if not self.user and self.role is None:
            return "no login (a database file)"
        return self.user if self.role is None else f"{self.user} as {self.role}"


def check_run_login(run_id: str, recorded: DatabaseLogin | None, own: DatabaseLogin) -> None:
    """Raise ``WrongDatabase`` unless the run was recorded to execute as ``own`` (the login this
    process would execute it with). A run with no recorded login is refused too (fail closed).

    Example:
        >>> check_run_login("r1", DatabaseLogin("reader"), DatabaseLogin("postgres"))
        Traceback (most recent call last):
        ...
        orchestrator.core.errors.WrongDatabase: run r1 executes as reader, and this process would \
execute it as postgres: nothing was run; resume it from a process that logs in as reader
    """
    if recorded != own:
        told = str(recorded) if recorded is not None else "an unrecorded login"
        raise WrongDatabase(
            f"run {run_id} executes as {told}, and this process would execute it as {own}: "
            f"nothing was run; resume it from a process that logs in as {told}"
        )
