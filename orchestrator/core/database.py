"""The target database, and the ONE factory from (database URL, policy) to what a run needs.

``TargetDatabase(url, policy=...)`` checks the URL, opens the read-only engine, takes the dialect
from the URL (nothing else picks a dialect for execution), reads the real schema once, and then
builds, for the base policy or a role's narrower one:

- ``validator(policy, identity)``: the ``SqlValidator`` in the engine's dialect, resolving every
  reference against the real schema (``safety.read_schema``) with the engine's default schema
  explicit, its row filters bound to the asker's attributes (``identity``);
- ``executor(policy)``: the ``SQLExecutor`` on the read-only engine, with the policy's row cap;
- ``gate_context(policy, identity)``: what an approval batch records (dialect, the policy, its
  fingerprint, the asker's attributes, the login its statements run as), and
  ``validator_for(context)``: the validator a later edit of that batch is checked with, from any
  process, under the policy the batch was created under and the ASKER's attributes (whoever
  edits, the filter protects what the asker sees);
- ``login_for(policy)`` / ``engine_for(policy)``: the database login a policy's statements run
  as (``DatabaseLogin``: the user this process connects as, read from the server, and the
  policy's ``database_role``; or the login of the URL in its ``database_url_env``) and the
  read-only engine that runs them so. A run records the login; every resume compares it.

The pipeline, the CLI, the server, the MCP server, the task worker and the approvals commands
all get their validators and executors here.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url

from agents.descriptions import Descriptions
from agents.linking import ValueIndex, ValueLimits
from agents.schema_explorer import SchemaExplorer, TableInfo
from agents.sql_executor import SQLExecutor
from orchestrator.core.errors import (
    ConfigurationError,
    DatabaseUnreachable,
    DatabaseURLInvalid,
    DialectMismatch,
    MissingExtra,
)
from orchestrator.core.extras import missing_extra
from orchestrator.core.identity import Identity, checked_identity, identity_key
from orchestrator.core.run_identity import DatabaseLogin, database_identity, schema_fingerprint
from safety import (
    DatabaseSchema,
    NameRules,
    Policy,
    PolicyError,
    ReadOnlySettings,
    SafetyPolicy,
    SqlValidator,
    check_privileges,
    dialect_for_url,
    open_readonly_engine,
    read_schema,
)

__all__ = ["TargetDatabase", "redact_url", "validator_without_database"]

log = logging.getLogger("sqlgate.database")

#: Validators kept per database (one per policy: the base policy and each role's, usually few).
_VALIDATORS_KEPT = 32


def redact_url(url: str) -> str:
    """The URL with its password hidden, safe for messages, logs and cache keys.

    Example:
        >>> redact_url("postgresql://ann:s3cret@db:5432/shop")
        'postgresql://ann:***@db:5432/shop'
        >>> redact_url("postgresql://ann:s3cret@db:port/shop")  # unparseable: still hidden
        'postgresql://ann:***@db:port/shop'
    """
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url.strip())[:200]


class TargetDatabase:
    """A database to answer questions from, opened read-only and probed once, with its policy.

    Example URLs: ``sqlite:///shop.db``, ``postgresql+psycopg://user@host/db``,
    ``mysql+pymysql://user@host/db``, ``duckdb:///warehouse.duckdb``.

    ``policy`` is what every question may read (default: ``Policy()``, star expanded, no table
    or column lists); ``statement_timeout_s``, when given, replaces the policy's timeout.
    ``privilege_warnings`` holds one sentence per right the connection's role has beyond reading
    (also logged as warnings when the database is opened).
    """

    def __init__(
        self,
        url: str,
        *,
        policy: Policy | None = None,
        statement_timeout_s: float | None = None,
        descriptions: Descriptions | None = None,
        value_limits: ValueLimits | None = ValueLimits(),  # noqa: B008 (frozen, never changed)
    ) -> None:
        if not url or not url.strip():
            raise DatabaseURLInvalid("no database URL given: pass --db URL or set SQLGATE_DB")
        try:
            parsed = make_url(url)  # ValueError for a non-numeric port
        except (sa_exc.ArgumentError, ValueError) as exc:
            port = " (its port is not a number)" if isinstance(exc, ValueError) else ""
            raise DatabaseURLInvalid(
                f"{redact_url(url)!r} is not a database URL{port}; expected e.g. "
                "sqlite:///path/to/file.db or postgresql+psycopg://user@host:5432/dbname"
            ) from exc
        policy = policy or Policy()
        if statement_timeout_s is not None:
            policy = policy.model_copy(update={"statement_timeout": float(statement_timeout_s)})
        self.policy = policy
        self.url = url
        self.safe_url = redact_url(url)
        #: The database's identity, which every run recorded here is bound to.
        self.identity = database_identity(url)
        try:
            self.dialect = dialect_for_url(url)
        except Exception as exc:
            raise DatabaseURLInvalid(
                f"unsupported database {parsed.drivername!r}: sqlgate supports sqlite, postgresql, "
                "mysql/mariadb and duckdb"
            ) from exc
        _check_login_settings(policy, self.dialect)
        try:
            self.engine: Engine = open_readonly_engine(
                url, ReadOnlySettings(statement_timeout_s=policy.statement_timeout)
            )
            #: The database user this process connects as (empty for a database file).
            self.login_user = _session_user(self.engine, self.dialect)
        except Exception as exc:  # drivers raise their own types for bad files and hosts
            extra = missing_extra(exc)
            if extra is not None:
                raise MissingExtra(f"a {parsed.get_backend_name()} database", extra) from exc
            raise DatabaseUnreachable(
                f"cannot open {self.safe_url} read-only: {_one_line(exc)}"
            ) from exc
        # engines of other logins (a database role, a role's own URL), opened on first use
        self._login_engines: dict[tuple[str | None, str | None], tuple[Engine, str]] = {}
        self._login_lock = threading.Lock()
        self.schema = SchemaExplorer(
            self.engine, cache_key=self.safe_url, descriptions=descriptions
        )
        self._resolved: DatabaseSchema | None = None
        self._lock = threading.Lock()
        # validators by (policy fingerprint, asker's attributes), for one schema read
        self._validators: dict[tuple[str, str], SqlValidator] = {}
        self._validators_of: DatabaseSchema | None = None
        self._validators_lock = threading.Lock()
        self.value_limits = value_limits
        self._values: tuple[Mapping[str, TableInfo], ValueIndex] | None = None
        self._values_lock = threading.Lock()
        try:
            self.privilege_warnings = check_privileges(self.engine)
        except Exception as exc:  # a role that may not read the grant tables: say so, go on
            self.privilege_warnings = [f"could not check the role's privileges: {_one_line(exc)}"]
        for warning in self.privilege_warnings:
            log.warning("%s: %s", self.safe_url, warning)

    # -- the factory -----------------------------------------------------------------------------

    def resolved_schema(self, refresh: bool = False) -> DatabaseSchema:
        """Every table and view with its columns, and the default schema (read once, cached)."""
        with self._lock:
            if self._resolved is None or refresh:
                try:
                    self._resolved = read_schema(self.engine)
                except Exception as exc:
                    raise DatabaseUnreachable(
                        f"cannot read the schema of {self.safe_url}: {_one_line(exc)}"
                    ) from exc
            return self._resolved

    def schema_fingerprint(self, refresh: bool = False) -> str:
        """The fingerprint of the schema validators resolve against (``refresh``: read it again
        first, so a resumed run sees the schema as it is now)."""
        return schema_fingerprint(self.resolved_schema(refresh=refresh))

    def value_index(self) -> ValueIndex | None:
        """The values of the schema's label-like text columns (``agents.linking.ValueIndex``),
        read on first use through the read-only engine, never from a column the base policy
        denies, and refreshed (only what changed is read again) when the schema is read again.
        None when turned off (``value_limits=None``)."""
        if self.value_limits is None:
            return None
        tables = self.schema.tables()
        with self._values_lock:
            if self._values is not None and self._values[0] is tables:
                return self._values[1]
            readable = self.readable()
            if self._values is None:
                index = ValueIndex.build(
                    self.engine, tables, readable=readable, limits=self.value_limits
                )
            else:
                index = self._values[1].refresh(self.engine, tables, readable=readable)
            self._values = (tables, index)
            return index

    def readable(self, policy: Policy | None = None) -> Callable[[str, str], bool]:
        """Whether ``policy`` (default: the base policy) lets a query read ``table.column`` of
        the engine's default schema: what the value index may read and show."""
        rules = NameRules.from_policy(*_name_lists((policy or self.policy).safety_policy()))
        if rules.empty:
            return _everything
        default = self.resolved_schema().default_schema

        def readable(table: str, column: str) -> bool:
            name, field = table.lower(), column.lower()
            return (
                rules.table_verdict(default, name, default) is None
                and rules.column_verdict(default, name, field, default) is None
            )

        return readable

    def policy_for(self, role: str | None) -> Policy:
        """The base policy, or the narrower one of ``role`` (``ConfigurationError`` naming the
        role when the policy has no such section)."""
        try:
            return self.policy.for_role(role)
        except PolicyError as exc:
            raise ConfigurationError(str(exc)) from None

    def section_for(self, role: str | None) -> str | None:
        """``role`` when the policy has a ``[roles.<role>]`` section, else None: a token's role
        (analyst, reviewer, admin) narrows what its questions may read only where the policy
        says how."""
        return role if role is not None and role in self.policy.roles else None

    def login_for(self, policy: Policy | None = None) -> DatabaseLogin:
        """The database login ``policy``'s statements run as from this process (opening the
        role's own URL on first use). ``ConfigurationError`` when this process cannot take it
        (the role's URL variable is not set here, or names another database)."""
        return self._login(policy or self.policy)[1]

    def engine_for(self, policy: Policy | None = None) -> Engine:
        """The read-only engine that runs ``policy``'s statements as ``login_for(policy)``."""
        return self._login(policy or self.policy)[0]

    def _login(self, policy: Policy) -> tuple[Engine, DatabaseLogin]:
        role, env = policy.database_role, policy.database_url_env
        if role is None and env is None:
            return self.engine, DatabaseLogin(self.login_user)
        key = (role, env)
        with self._login_lock:
            found = self._login_engines.get(key)
            if found is None:
                found = self._open_login(policy, role, env)
                self._login_engines[key] = found
        return found[0], DatabaseLogin(found[1], role)

    def _open_login(self, policy: Policy, role: str | None, env: str | None) -> tuple[Engine, str]:
        url = self.url
        if env is not None:
            url = os.environ.get(env, "")
            if not url:
                raise ConfigurationError(
                    f"the policy runs some statements with the login in {env}, which is not set "
                    "in this process"
                )
            if database_identity(url) != self.identity:
                raise ConfigurationError(
                    f"{env} is {redact_url(url)}, another database than {self.safe_url}: a "
                    "role's login must reach the same database"
                )
        settings = ReadOnlySettings(
            statement_timeout_s=self.policy.statement_timeout, postgres_role=role
        )
        try:
            engine = open_readonly_engine(url, settings)
            user = _session_user(engine, self.dialect, role)
        except Exception as exc:
            raise DatabaseUnreachable(
                f"cannot open {redact_url(url)} read-only"
                f"{f' as role {role}' if role else ''}: {_one_line(exc)}"
            ) from exc
        return engine, user

    def validator(
        self, policy: Policy | None = None, identity: Identity | None = None
    ) -> SqlValidator:
        """The validator for ``policy`` (default: the base policy), in the engine's dialect,
        resolving every reference against the real schema, its row filters bound to the asker's
        attributes ``identity`` (none: a filtered table is refused, ``row_filter_unbound``).

        Built once per (policy, attributes) and schema read (a validator does not change once
        built), so a run, each cycle and each edit check share one; a refreshed schema builds
        new ones."""
        schema = self.resolved_schema()
        chosen = policy or self.policy
        key = (chosen.fingerprint(), identity_key(identity))
        with self._validators_lock:
            if self._validators_of is not schema:
                self._validators_of, self._validators = schema, {}
            found = self._validators.get(key)
            if found is None:
                found = SqlValidator(
                    self.dialect,
                    policy=chosen.safety_policy(),
                    schema=schema.tables,
                    default_schema=schema.default_schema,
                    views=schema.views,
                    identity=dict(identity) if identity else None,
                )
                if len(self._validators) >= _VALIDATORS_KEPT:
                    self._validators.pop(next(iter(self._validators)))
                self._validators[key] = found
            return found

    def executor(self, policy: Policy | None = None) -> SQLExecutor:
        """The executor on the read-only engine, keeping at most the policy's ``row_cap`` rows
        and ``max_result_bytes`` bytes of them; when the policy protects columns, database
        errors reach no one but the server log in full (``safety.error_text``)."""
        chosen = policy or self.policy
        return SQLExecutor(
            self.engine_for(chosen),
            row_cap=chosen.row_cap,
            max_result_bytes=chosen.max_result_bytes,
            redact_errors=chosen.protects_columns,
        )

    def gate_context(
        self, policy: Policy | None = None, identity: Identity | None = None
    ) -> dict[str, object]:
        """What an approval batch records so that later edits are judged the same way (the
        asker's attributes among it), and the login its statements will run as (what the
        reviewer is shown)."""
        chosen = policy or self.policy
        return {
            **batch_context(self.dialect, chosen, identity),
            "login": str(self.login_for(chosen)),
        }

    def validator_for(self, context: Mapping[str, object]) -> SqlValidator:
        """The validator for edits of a batch: its dialect (which must be this engine's) and the
        policy it was created under (the base policy for batches that recorded none) and the
        asker's attributes it recorded (none recorded: filtered tables are refused)."""
        dialect = context.get("dialect")
        if dialect is not None and dialect != self.dialect:
            raise DialectMismatch(
                f"the batch was checked as {dialect} but {self.safe_url} is {self.dialect}"
            )
        return self.validator(policy_of(context, self.policy), identity_of(context))

    def dispose(self) -> None:
        self.engine.dispose()
        for engine, _ in self._login_engines.values():
            engine.dispose()


def batch_context(
    dialect: str, policy: Policy, identity: Identity | None = None
) -> dict[str, object]:
    """``{"dialect", "policy", "policy_fingerprint", "identity"}``: stored with an approval
    batch (``identity``: the asker's attributes its row filters are bound to)."""
    return {
        "dialect": dialect,
        "policy": policy.model_dump(mode="json"),
        "policy_fingerprint": policy.fingerprint(),
        "identity": dict(identity) if identity else None,
    }


def identity_of(context: Mapping[str, object]) -> Identity | None:
    """The asker's attributes a batch context recorded (None when it recorded none)."""
    return checked_identity(context.get("identity"))


def policy_of(context: Mapping[str, object], default: Policy) -> Policy:
    """The policy a batch context recorded (``default`` when it recorded none)."""
    stored = context.get("policy")
    return Policy.from_data(stored) if stored is not None else default


def validator_without_database(context: Mapping[str, object], default: Policy) -> SqlValidator:
    """The validator for edits of a batch when its database is not at hand: the batch's dialect
    and policy, without a schema. Fail closed: with table or column rules, anything that cannot
    be resolved without the schema is refused, and ``SELECT *`` cannot be expanded."""
    dialect = context.get("dialect")
    return SqlValidator(
        str(dialect) if dialect else "sqlite",
        policy=policy_of(context, default).safety_policy(),
        identity=identity_of(context),
    )


def _check_login_settings(policy: Policy, dialect: str) -> None:
    """``database_role`` is a PostgreSQL ``SET ROLE``: refused on other engines at start."""
    if dialect == "postgres":
        return
    named = [("the policy", policy.database_role)] + [
        (f"roles.{name}", role.database_role) for name, role in policy.roles.items()
    ]
    for where, role in named:
        if role is not None:
            raise ConfigurationError(
                f"{where}: database_role switches roles on PostgreSQL only; on {dialect} give "
                "the role its own login with database_url_env"
            )


def _session_user(engine: Engine, dialect: str, role: str | None = None) -> str:
    """The user the engine's connections log in as, asked of the server (a URL without a user
    logs in as the driver's default); empty for a database file. With ``role``, one statement
    checks that the role can be taken (the engine takes it in every transaction)."""
    if dialect not in ("postgres", "mysql"):
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1").fetchall()
        return ""
    query = "SELECT session_user" if dialect == "postgres" else "SELECT CURRENT_USER()"
    with engine.connect() as connection:
        user = connection.exec_driver_sql(query).scalar()
    return str(user or "")


def _everything(table: str, column: str) -> bool:
    return True


def _name_lists(
    policy: SafetyPolicy,
) -> tuple[tuple[str, ...] | None, tuple[str, ...], tuple[str, ...] | None, tuple[str, ...]]:
    return (
        policy.allowed_tables,
        policy.denied_tables,
        policy.allowed_columns,
        policy.denied_columns,
    )


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first[:300]
