"""The second wall: engines whose every connection is read-only and time-bounded in the database.

The validator decides what may run; these engines make sure that even SQL which slipped past it
cannot write, reach files, or run forever.

- SQLite: ``mode=ro`` URI, ``PRAGMA query_only``, no attached databases (which also stops
  ``VACUUM INTO``), a length limit on strings, blobs and SQL text, an authorizer that allows
  only reads, a progress handler that interrupts a statement past its deadline, and ``REGEXP``
  backed by RE2 (linear time) instead of the backtracking ``re`` SQLAlchemy registers.
- PostgreSQL: ``default_transaction_read_only``, ``statement_timeout`` and the settings that
  change how SQL text is read (``POSTGRES_LEXICAL``: ``standard_conforming_strings=on``,
  ``backslash_quote=safe_encoding``, UTF-8) at connect; ``SET TRANSACTION READ ONLY`` + local
  ``statement_timeout``, ``work_mem`` and those lexical settings at the start of every
  transaction (and ``temp_file_limit`` when the role may set it: it needs a superuser),
  and every statement prepared server-side, so a text holding several statements is refused by
  the server.
- MySQL / MariaDB: ``SET SESSION TRANSACTION READ ONLY`` before every statement (DDL commits
  implicitly and then runs with the session's characteristics), ``START TRANSACTION READ ONLY``
  for every transaction, ``max_execution_time`` (MySQL) or ``max_statement_time`` (MariaDB),
  bounded in-memory temporary tables, the ``utf8mb4`` character set, a pinned ``sql_mode`` whose
  string and identifier quoting is the one sqlglot's ``mysql`` rendering expects (see
  ``MYSQL_SQL_MODE``), and no
  multi-statement flag on the client.
- PostgreSQL and MySQL engines default to ``NullPool``: session state (a ``SET``, an advisory
  or user lock) never outlives one checkout. Pass ``poolclass=`` to choose otherwise.
- DuckDB: ``read_only``, ``enable_external_access=false``, extension autoload off, bounded
  ``threads`` and ``memory_limit``, no spilling to disk, ``lock_configuration``, and an
  interrupt when the statement timeout passes.

Time limits alone do not bound an embedded engine: one step of SQLite or DuckDB can run long
past its deadline and take gigabytes. ``safety.sandbox`` therefore runs the approved statements
of SQLite and DuckDB engines in worker processes with OS limits; the engines built here remember
what they were opened with (``embedded_target``) so the sandbox can open the same database.

Settings that change how SQL text is read are pinned where an engine has them: PostgreSQL's
``POSTGRES_LEXICAL`` and MariaDB's ``sql_mode`` and character set above; DuckDB reads literals one
way only and ``lock_configuration`` keeps a statement from changing any setting; SQLite has none
a statement could change (its authorizer refuses every ``PRAGMA`` that sets).

The executor should still open a connection per query and let it roll back on close.
A least-privilege database role (SELECT only) remains the recommended deployment.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool, QueuePool

from .dialects import dialect_for_url
from .errors import ReadOnlySetupError
from .sqlite_regexp import install_regexp

__all__ = [
    "MYSQL_SQL_MODE",
    "POSTGRES_LEXICAL",
    "ReadOnlySettings",
    "duckdb_config",
    "embedded_target",
    "open_readonly_engine",
    "sqlite_readonly_connection",
]

log = logging.getLogger(__name__)

_SIZE = r"^[1-9][0-9]*(kB|MB|GB)$"


class ReadOnlySettings(BaseModel):
    """Bounds applied to every read-only connection."""

    model_config = ConfigDict(frozen=True)

    statement_timeout_s: float = Field(
        default=10.0, gt=0, description="Longest a statement may run."
    )
    max_value_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="SQLite: longest string or blob a query may build.",
    )
    postgres_role: str | None = Field(
        default=None,
        description="PostgreSQL: a SELECT-only role taken with SET LOCAL ROLE in every transaction, for "
        "deployments whose URL user has more rights than reading.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
    )
    sqlite_progress_steps: int = Field(
        default=1000, ge=1, description="SQLite: virtual-machine steps between deadline checks."
    )
    max_sql_bytes: int = Field(
        default=1024 * 1024, ge=1024, description="SQLite: longest SQL text a statement may have."
    )
    max_regexp_pattern_bytes: int = Field(
        default=1024, ge=16, description="SQLite: longest REGEXP pattern (matched by RE2)."
    )
    postgres_work_mem: str = Field(
        default="32MB",
        pattern=_SIZE,
        description="PostgreSQL: work_mem of every transaction (memory per sort or hash).",
    )
    postgres_temp_file_limit: str = Field(
        default="1GB",
        pattern=_SIZE,
        description="PostgreSQL: temp_file_limit of every transaction, when the role may set it "
        "(superuser only); otherwise a warning is logged once and the server's value stays.",
    )
    mysql_tmp_table_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=16 * 1024,
        description="MySQL/MariaDB: tmp_table_size and max_heap_table_size of every session.",
    )
    sandbox_workers: int = Field(
        default=2,
        ge=0,
        description="SQLite/DuckDB: warm worker processes that run approved statements under OS "
        "limits (safety.sandbox); 0 runs them in the calling process, with no bound on memory.",
    )
    worker_memory_bytes: int = Field(
        default=1024 * 1024 * 1024,
        ge=64 * 1024 * 1024,
        description="SQLite/DuckDB: address space a worker may add to what its engine mapped at "
        "start (RLIMIT_AS); DuckDB's memory_limit is half of it.",
    )
    duckdb_threads: int = Field(default=2, ge=1, description="DuckDB: threads per connection.")
    max_result_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="SQLite/DuckDB: largest result (pickled rows) a worker may send back.",
    )


def open_readonly_engine(
    url: str,
    settings: ReadOnlySettings | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    **engine_kwargs: object,
) -> Engine:
    """A SQLAlchemy engine whose every connection is read-only at the database level.

    Example:
        >>> import sqlite3, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "shop.db")
        >>> sqlite3.connect(path).execute("create table t(a)").connection.commit()
        >>> engine = open_readonly_engine(f"sqlite:///{path}")
        >>> with engine.connect() as conn:
        ...     conn.exec_driver_sql("select count(*) from t").scalar()
        0
    """
    settings = settings or ReadOnlySettings()
    dialect = dialect_for_url(url)
    builders = {
        "sqlite": _sqlite_engine,
        "postgres": _postgres_engine,
        "mysql": _mysql_engine,
        "duckdb": _duckdb_engine,
    }
    engine = builders[dialect](url, settings, clock, dict(engine_kwargs))
    if dialect in ("sqlite", "duckdb"):
        _EMBEDDED[engine] = (url, settings)
    return engine


_EMBEDDED: weakref.WeakKeyDictionary[Engine, tuple[str, ReadOnlySettings]] = (
    weakref.WeakKeyDictionary()
)


def embedded_target(engine: Engine) -> tuple[str, ReadOnlySettings] | None:
    """The URL and settings a SQLite or DuckDB engine of ``open_readonly_engine`` was opened with
    (None for any other engine), so a worker process can open the same database alike."""
    return _EMBEDDED.get(engine)


# --- SQLite --------------------------------------------------------------------------------

_SQLITE_READ_ACTIONS = frozenset(
    {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
)
# Statements SQLAlchemy itself issues around a read (BEGIN / COMMIT / ROLLBACK, savepoints).
_SQLITE_TXN_ACTIONS = frozenset({sqlite3.SQLITE_TRANSACTION, sqlite3.SQLITE_SAVEPOINT})
# Pragmas that only read the schema; any argument is a table or index name.
_SQLITE_SCHEMA_PRAGMAS = frozenset(
    {
        "table_info",
        "table_xinfo",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "table_list",
    }
)
# Pragmas that may be read (never set).
_SQLITE_READ_PRAGMAS = frozenset(
    {"read_uncommitted", "database_list", "collation_list", "encoding", "user_version"}
)
_SQLITE_DENIED_FUNCTIONS = frozenset(
    {
        "load_extension",
        "fts3_tokenizer",
        "readfile",
        "writefile",
        "edit",
        "fsdir",
        "randomblob",
        "zeroblob",
    }
)


def sqlite_authorizer(
    action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
) -> int:
    """Allow reads only: SELECT, column reads, pure functions, schema pragmas."""
    if action in _SQLITE_READ_ACTIONS or action in _SQLITE_TXN_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return (
            sqlite3.SQLITE_DENY
            if (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS
            else sqlite3.SQLITE_OK
        )
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in _SQLITE_SCHEMA_PRAGMAS or (name in _SQLITE_READ_PRAGMAS and arg2 is None):
            return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class _ReadOnlySqliteConnection(sqlite3.Connection):
    """A sqlite3 connection carrying the deadline of the statement it is running."""

    deadline: float | None = None


def _sqlite_target(url: str) -> str:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ReadOnlySetupError(
            "a read-only SQLite engine needs a database file, not an in-memory database"
        )
    target = database if database.startswith("file:") else f"file:{quote(database)}"
    return target + ("&" if "?" in target else "?") + "mode=ro"


def sqlite_readonly_connection(
    url: str,
    settings: ReadOnlySettings,
    clock: Callable[[], float] = time.monotonic,
    factory: type[sqlite3.Connection] | None = None,
) -> sqlite3.Connection:
    """A raw sqlite3 connection to the file of ``url``, read-only and bounded as described above.

    Its ``deadline`` attribute (a ``clock()`` value, or None) interrupts the running statement.
    """
    conn = sqlite3.connect(
        _sqlite_target(url),
        uri=True,
        factory=factory or _ReadOnlySqliteConnection,
        check_same_thread=False,
    )
    conn.execute("PRAGMA query_only = 1")
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)  # no ATTACH, and so no VACUUM INTO
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, settings.max_value_bytes)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, settings.max_sql_bytes)
    install_regexp(conn, settings.max_regexp_pattern_bytes)
    conn.set_authorizer(sqlite_authorizer)

    def past_deadline() -> int:
        deadline = getattr(conn, "deadline", None)
        return int(deadline is not None and clock() > deadline)

    conn.set_progress_handler(past_deadline, settings.sqlite_progress_steps)
    return conn


def _sqlite_engine(
    url: str, settings: ReadOnlySettings, clock: Callable[[], float], kwargs: dict
) -> Engine:
    _sqlite_target(url)  # refuse an in-memory database now, not at the first query

    def connect() -> sqlite3.Connection:
        return sqlite_readonly_connection(url, settings, clock)

    # "sqlite://" would make SQLAlchemy pick SingletonThreadPool (one connection per thread, five
    # kept, others closed under their users' feet): a file needs a real pool.
    kwargs.setdefault("poolclass", QueuePool)
    engine = sa.create_engine("sqlite://", creator=connect, **kwargs)

    @event.listens_for(engine, "connect")
    def _replace_python_regexp(dbapi_connection, connection_record):
        # SQLAlchemy's pysqlite dialect has just registered Python's backtracking ``re``.
        install_regexp(dbapi_connection, settings.max_regexp_pattern_bytes)

    @event.listens_for(engine, "before_cursor_execute")
    def _start_deadline(conn, cursor, statement, parameters, context, executemany):
        # Rows are produced while fetching, so the deadline stays until the next statement.
        conn.connection.dbapi_connection.deadline = clock() + settings.statement_timeout_s

    @event.listens_for(engine, "checkin")
    def _clear_deadline(dbapi_connection, connection_record):
        if dbapi_connection is not None:
            dbapi_connection.deadline = None

    return engine


# --- PostgreSQL ----------------------------------------------------------------------------


POSTGRES_LEXICAL = {
    "standard_conforming_strings": "on",
    "backslash_quote": "safe_encoding",
    "client_encoding": "UTF8",
}
"""The PostgreSQL settings that change how a statement's text is read, pinned on every read-only
connection (at connect, and again with ``SET LOCAL`` at the start of every transaction),
whatever the server, database or role defaults say: with ``standard_conforming_strings`` off a
backslash escapes the next character inside ``'...'``, so ``'\\'`` would end a literal where
sqlglot's ``postgres`` reading (and so the validator) saw none; ``backslash_quote`` and a
multi-byte ``client_encoding`` are the other two ways a quote hides behind a backslash.
"""


def _postgres_engine(
    url: str, settings: ReadOnlySettings, clock: Callable[[], float], kwargs: dict
) -> Engine:
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # the driver sqlgate ships with
    if parsed.get_driver_name() != "psycopg":
        raise ReadOnlySetupError(
            "read-only PostgreSQL engines need the psycopg (3) driver: postgresql+psycopg://"
        )
    timeout_ms = max(1, int(settings.statement_timeout_s * 1000))
    connect_args = dict(kwargs.pop("connect_args", {}) or {})
    if (
        "options" in parsed.query
    ):  # keep the user's own options (e.g. -csearch_path=...) from the URL
        user_options = parsed.query["options"]
        user_options = " ".join(user_options) if isinstance(user_options, tuple) else user_options
        connect_args["options"] = f"{user_options} {connect_args.get('options', '')}".strip()
        parsed = parsed.difference_update_query(["options"])
    options = f"-c default_transaction_read_only=on -c statement_timeout={timeout_ms} " + " ".join(
        f"-c {name}={value}" for name, value in POSTGRES_LEXICAL.items()
    )
    connect_args["options"] = (
        f"{connect_args['options']} {options}" if connect_args.get("options") else options
    )
    connect_args["prepare_threshold"] = (
        0  # every statement prepared server-side: one statement per execute
    )
    kwargs.setdefault("poolclass", NullPool)  # no session state outlives one checkout
    engine = sa.create_engine(parsed, connect_args=connect_args, **kwargs)
    # temp_file_limit may be set by superusers only: probed once per engine (None = not yet).
    may_limit_temp_files: list[bool | None] = [None]

    @event.listens_for(engine, "connect")
    def _probe_temp_file_limit(dbapi_connection, connection_record):
        if may_limit_temp_files[0] is not None:
            return
        try:
            dbapi_connection.execute(
                "SELECT set_config('temp_file_limit', %s, true)",
                (settings.postgres_temp_file_limit,),
            )
            may_limit_temp_files[0] = True
        except Exception as exc:  # InsufficientPrivilege: the role is not a superuser
            may_limit_temp_files[0] = False
            log.warning(
                "PostgreSQL temp_file_limit not applied (%s): a statement's temporary files are "
                "bounded only by the server's own setting",
                " ".join(str(exc).split())[:200],
            )
        dbapi_connection.rollback()

    bounds = ["statement_timeout", "work_mem", *POSTGRES_LEXICAL]
    values: list[str] = [str(timeout_ms), settings.postgres_work_mem, *POSTGRES_LEXICAL.values()]

    @event.listens_for(engine, "before_cursor_execute")
    def _read_only_transaction(conn, cursor, statement, parameters, context, executemany):
        # Whatever an earlier statement did to the session (SET ..., COMMIT), the transaction this
        # statement opens is read-only and bounded.
        raw = conn.connection.dbapi_connection
        if raw.info.transaction_status == _PG_IDLE:
            raw.execute("SET TRANSACTION READ ONLY")
            names, args = list(bounds), list(values)
            if may_limit_temp_files[0]:
                names.append("temp_file_limit")
                args.append(settings.postgres_temp_file_limit)
            # set_config(..., true) is SET LOCAL; one round trip for every bound.
            raw.execute(
                "SELECT " + ", ".join(f"set_config('{n}', %s, true)" for n in names), tuple(args)
            )
            if settings.postgres_role:
                raw.execute(f'SET LOCAL ROLE "{settings.postgres_role}"')

    return engine


_PG_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE


# --- MySQL / MariaDB -----------------------------------------------------------------------

_MYSQL_IN_TRANSACTION = 1  # pymysql SERVER_STATUS_IN_TRANS

MYSQL_SQL_MODE = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
"""The ``sql_mode`` of every read-only MySQL/MariaDB session, whatever the server's default.

Its lexical part is the one sqlglot's ``mysql`` dialect reads and writes: a backslash escapes
the next character inside a string (sqlglot renders a backslash as ``\\\\`` and a newline as
``\\n``), so no ``NO_BACKSLASH_ESCAPES``; ``"..."`` is a string and identifiers are quoted
with backticks, so no ``ANSI_QUOTES``; ``||`` is OR, so no ``PIPES_AS_CONCAT``. Pinning it means
a server configured otherwise can never end a literal where the validator did not. SQL checked
in another dialect never reaches this engine: the executor refuses a dialect mismatch.
"""


def _mysql_engine(
    url: str, settings: ReadOnlySettings, clock: Callable[[], float], kwargs: dict
) -> Engine:
    parsed = make_url(url)
    if parsed.get_driver_name() != "pymysql":
        raise ReadOnlySetupError(
            "read-only MySQL/MariaDB engines need the pymysql driver: mysql+pymysql://"
        )
    from pymysql.constants import CLIENT

    connect_args = dict(kwargs.pop("connect_args", {}) or {})
    connect_args["client_flag"] = int(connect_args.get("client_flag", 0)) & ~CLIENT.MULTI_STATEMENTS
    connect_args["charset"] = "utf8mb4"  # no multi-byte charset whose bytes can hide a quote
    kwargs.setdefault(
        "poolclass", NullPool
    )  # user locks and session variables die with the connection
    engine = sa.create_engine(parsed, connect_args=connect_args, **kwargs)

    def bound(cursor, raw) -> None:
        if getattr(raw, "_sqlgate_mariadb", None) is None:
            cursor.execute("SELECT VERSION()")
            raw._sqlgate_mariadb = "mariadb" in str(cursor.fetchone()[0]).lower()
        if raw._sqlgate_mariadb:
            timeout = f"max_statement_time = {settings.statement_timeout_s:.3f}"
        else:
            timeout = f"max_execution_time = {max(1, int(settings.statement_timeout_s * 1000))}"
        tmp = settings.mysql_tmp_table_bytes
        cursor.execute(
            f"SET SESSION sql_mode = '{MYSQL_SQL_MODE}', {timeout}, "
            f"tmp_table_size = {tmp}, max_heap_table_size = {tmp}"
        )

    @event.listens_for(engine, "before_cursor_execute")
    def _read_only_session(conn, cursor, statement, parameters, context, executemany):
        # DDL commits implicitly and then runs with the session's characteristics, so the session
        # itself is set read-only before every statement, whatever an earlier one changed.
        raw = conn.connection.dbapi_connection
        with raw.cursor() as own:
            own.execute("SET SESSION TRANSACTION READ ONLY")
            if not raw.server_status & _MYSQL_IN_TRANSACTION:
                bound(own, raw)
                own.execute("START TRANSACTION READ ONLY")

    return engine


# --- DuckDB --------------------------------------------------------------------------------

_DUCKDB_CONFIG = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}


def duckdb_config(settings: ReadOnlySettings) -> dict[str, Any]:
    """The DuckDB ``config`` of a read-only connection: no files, no extensions, bounded memory
    and threads, no spilling to disk, and settings locked against the statements it runs."""
    return {
        **_DUCKDB_CONFIG,
        "threads": settings.duckdb_threads,
        "memory_limit": f"{max(1, settings.worker_memory_bytes // 2 // (1024 * 1024))}MB",
        "temp_directory": "",
    }


def _duckdb_engine(
    url: str, settings: ReadOnlySettings, clock: Callable[[], float], kwargs: dict
) -> Engine:
    database = make_url(url).database
    if not database or database == ":memory:":
        raise ReadOnlySetupError(
            "a read-only DuckDB engine needs a database file, not an in-memory database"
        )
    connect_args = dict(kwargs.pop("connect_args", {}) or {})
    connect_args["read_only"] = True
    connect_args["config"] = {
        **dict(connect_args.get("config", {}) or {}),
        **duckdb_config(settings),
    }
    engine = sa.create_engine(url, connect_args=connect_args, **kwargs)
    timers: dict[int, threading.Timer] = {}

    @event.listens_for(engine, "before_cursor_execute")
    def _arm(conn, cursor, statement, parameters, context, executemany):
        raw = conn.connection.dbapi_connection
        timer = threading.Timer(settings.statement_timeout_s, raw.interrupt)
        timer.daemon = True
        timers[id(conn)] = timer
        timer.start()

    def _disarm(conn, *args):
        timer = timers.pop(id(conn), None)
        if timer is not None:
            timer.cancel()

    event.listen(engine, "after_cursor_execute", _disarm)
    event.listen(engine, "handle_error", lambda context: _disarm(context.connection))
    return engine
