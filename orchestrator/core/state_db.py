"""sqlgate's state database: one location, one engine, one migration runner for every table.

What sqlgate keeps between processes lives here: approval batches, the audit log and the
execution ledger (``approvals``), run checkpoints (``runs``), full result rows (``results``),
the server's runs and events (``server``), and the stores the features register
(``register_store``: reviewed-SQL memory as ``memory``, the notification outbox as
``notifications``, from ``orchestrator.wiring``). Each component has an append-only list of
migrations applied by the one runner (``approvals.migrations.migrate``), its version recorded
in ``sqlgate_schema``. Stores talk to their own tables through their own methods, on this
module's shared engine.

Where it is: ``$SQLGATE_STATE_URL`` (a SQLAlchemy URL; PostgreSQL to share it between hosts),
else a SQLite file ``state.sqlite`` in sqlgate's state folder (``$SQLGATE_STATE_DIR``, else
``$XDG_STATE_HOME/sqlgate``, else ``~/.local/state/sqlgate``). ``SQLGATE_APPROVALS_URL`` is read
as a deprecated alias of ``SQLGATE_STATE_URL`` for one release.

Example:
    >>> state = StateDatabase("sqlite://")
    >>> state.setup()
    >>> {'approvals', 'results', 'runs', 'server'} <= set(state.versions())
    True
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from approvals import SchemaVersionError, SqlApprovalStore
from approvals.migrations import schema_versions, state_engine
from orchestrator.core.database import redact_url
from orchestrator.core.errors import StateDatabaseError
from orchestrator.core.extras import needing
from orchestrator.core.result_rows import ResultRowStore
from orchestrator.core.runs import RunStore
from orchestrator.core.state_folder import state_dir
from orchestrator.core.state_patience import StatePatience, patience_from_env

_Store = TypeVar("_Store")

if TYPE_CHECKING:
    from orchestrator.core.batches import BatchStore
    from orchestrator.core.server_state import ServerState

__all__ = [
    "STATE_URL_ENV",
    "StateDatabase",
    "StateStore",
    "default_state_url",
    "lasting",
    "register_store",
    "registered_stores",
    "state_errors",
]


class StateStore(Protocol):
    """A component's store: built on the shared engine, its tables migrated by ``setup()``
    (safe to call twice)."""

    def setup(self) -> None: ...


_S = TypeVar("_S", bound=StateStore)

#: The components other packages keep in the state database: name -> store class.
_REGISTERED: dict[str, type[StateStore]] = {}
_registered_lock = threading.Lock()


def register_store(name: str, kind: type[StateStore]) -> None:
    """Keep ``kind``'s tables in every state database of this process: ``setup()`` migrates
    them and ``state.<name>`` (or ``state.store(kind)``) is the store. Registering the same
    store again changes nothing; another store under a taken name is refused."""
    with _registered_lock:
        known = _REGISTERED.get(name)
        if known is not None and known is not kind:
            raise ValueError(f"the state database already keeps {known.__name__} as {name!r}")
        _REGISTERED[name] = kind


def registered_stores() -> dict[str, type[StateStore]]:
    """The registered components, by name."""
    with _registered_lock:
        return dict(_REGISTERED)


STATE_URL_ENV = "SQLGATE_STATE_URL"
_DEPRECATED_URL_ENV = "SQLGATE_APPROVALS_URL"


def default_state_url(environ: Mapping[str, str] | None = None) -> str:
    """``$SQLGATE_STATE_URL``, else (deprecated) ``$SQLGATE_APPROVALS_URL``, else the state folder's
    SQLite file."""
    env = os.environ if environ is None else environ
    explicit = env.get(STATE_URL_ENV)
    if explicit:
        return lasting(explicit, STATE_URL_ENV)
    legacy = env.get(_DEPRECATED_URL_ENV)
    if legacy:
        warnings.warn(
            f"{_DEPRECATED_URL_ENV} is deprecated; set {STATE_URL_ENV} instead",
            DeprecationWarning,
            stacklevel=2,
        )
        return lasting(legacy, _DEPRECATED_URL_ENV)
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'state.sqlite'}"


def lasting(url: str, source: str = STATE_URL_ENV) -> str:
    """``url`` when it names a database that outlives this process; ``StateDatabaseError``
    (exit 10) for an in-memory or temporary one (``sqlite://``, ``sqlite:///``, ``:memory:``,
    ``mode=memory``), whose runs, batches and ledger would vanish with the process that wrote them.

    Example:
        >>> lasting("sqlite:////var/lib/sqlgate/state.sqlite")
        'sqlite:////var/lib/sqlgate/state.sqlite'
        >>> lasting("sqlite:///")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        orchestrator.core.errors.StateDatabaseError: SQLGATE_STATE_URL='sqlite:///' is an in-memory...
    """
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        return url  # not a URL: opening it says so, in one sentence
    database = (parsed.database or "").strip()
    query = {k: str(v) for k, v in parsed.query.items()}
    in_memory = parsed.get_backend_name() == "sqlite" and (
        database in ("", ":memory:")
        or database.startswith("file::memory:")
        or query.get("mode") == "memory"
        or "mode=memory" in database
    )
    if in_memory:
        shown = url if len(url) <= 80 else url[:79] + "…"
        raise StateDatabaseError(
            f"{source}={shown!r} is an in-memory database that ends with the process: runs, "
            "approvals and the ledger must outlive it, so give a file "
            "(sqlite:////path/state.sqlite) or a server URL"
        )
    return url


#: The longest driver message quoted in a state database error.
_REASON_CHARS = 200


@contextmanager
def state_errors(safe_url: str) -> Iterator[None]:
    """Turn whatever opening, reading or migrating the state database raised into one
    ``StateDatabaseError`` sentence (a bad URL, an unreachable server, a file that is not a
    database, a directory, a read-only file, a schema newer than this sqlgate)."""
    try:
        yield
    except StateDatabaseError:
        raise
    except SchemaVersionError as exc:
        raise StateDatabaseError(str(exc)) from None
    except ImportError as exc:  # a driver named in the URL that is not installed
        module = exc.name or _reason(exc)
        raise StateDatabaseError(
            f"the state database URL {safe_url!r} ({STATE_URL_ENV}) needs the Python module "
            f"{module!r}, which is not installed (PostgreSQL: postgresql+psycopg://, from "
            "pip install 'sqlgate[postgres]')"
        ) from None
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise StateDatabaseError(
            f"the state database URL {safe_url!r} ({STATE_URL_ENV}) is not one sqlgate can open: "
            f"{_reason(exc)}"
        ) from None
    except sa.exc.DBAPIError as exc:
        reason = _reason(exc.orig if exc.orig is not None else exc)
        hint = ""
        if "readonly" in reason.replace("-", "").replace(" ", ""):
            hint = " (make the file and its folder writable, or set SQLGATE_STATE_URL)"
        raise StateDatabaseError(
            f"the state database {safe_url} cannot be used: {reason}{hint}"
        ) from None
    except (sa.exc.SQLAlchemyError, OSError) as exc:
        raise StateDatabaseError(
            f"the state database {safe_url} cannot be used: {_reason(exc)}"
        ) from None


def _reason(exc: BaseException) -> str:
    """The first line of an error's message, bounded, without a trailing period."""
    lines = str(exc).strip().splitlines()
    text = (lines[0] if lines else type(exc).__name__).strip().rstrip(".")
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


class StateDatabase:
    """The state database and the stores on it, sharing one engine.

    ``setup()`` migrates every component (safe from several processes at once); the stores are
    built on first use, each operation of each store run through ``patience``
    (``orchestrator.core.state_patience``: tried again while the connection is lost, for
    ``$SQLGATE_STATE_PATIENCE`` seconds by default), so every process inherits one retry policy.
    """

    def __init__(self, url: str | None = None, *, patience: StatePatience | None = None) -> None:
        with state_errors(STATE_URL_ENV):
            self.url = url or default_state_url()
            self.patience = patience or StatePatience(patience_from_env())
        self.safe_url = redact_url(self.url)
        with state_errors(self.safe_url):
            self.engine: Engine = needing(
                f"the state database {self.safe_url}", lambda: state_engine(self.url)
            )
        self._stores: dict[type[StateStore], StateStore] = {}
        self._stores_lock = threading.Lock()

    def setup(self) -> None:
        """Migrate every component; ``StateDatabaseError`` (one sentence) when the database
        cannot be used."""
        with state_errors(self.safe_url):
            self.approvals.setup()
            self.runs.setup()
            self.server.setup()
            self.results.setup()
            for kind in registered_stores().values():
                self.store(kind).setup()

    @cached_property
    def approvals(self) -> SqlApprovalStore:
        return self._patient(SqlApprovalStore(self.engine))

    @cached_property
    def batches(self) -> BatchStore:
        """Distributed batches (set up on first use: only ``batch --distributed`` needs them)."""
        from orchestrator.core.batches import BatchStore

        return self._patient(BatchStore(self.engine))

    @cached_property
    def runs(self) -> RunStore:
        return self._patient(RunStore(self.engine))

    @cached_property
    def results(self) -> ResultRowStore:
        return self._patient(ResultRowStore(self.engine))

    def store(self, kind: type[_S]) -> _S:
        """The one ``kind`` store on this database (a registered component's, or any store
        class built on the engine), built on first use."""
        with self._stores_lock:
            found = self._stores.get(kind)
            if found is None:
                found = self._stores[kind] = self._patient(kind(self.engine))  # type: ignore[call-arg]  # a store is built on the engine
        assert isinstance(found, kind)
        return found

    def __getattr__(self, name: str) -> StateStore:
        """A registered component's store by its name (``state.memory``)."""
        if name.startswith("_"):
            raise AttributeError(name)
        kind = registered_stores().get(name)
        if kind is None:
            raise AttributeError(
                f"the state database keeps no {name!r} store (registered: "
                f"{', '.join(sorted(registered_stores())) or 'none'})"
            )
        return self.store(kind)

    @cached_property
    def server(self) -> ServerState:
        from orchestrator.core.server_state import (
            ServerState,  # late: the server package is heavier
        )

        return self._patient(ServerState(self.engine))

    def _patient(self, store: _Store) -> _Store:
        self.patience.guard(store, f"the state database {self.safe_url}")
        return store

    def versions(self) -> dict[str, int]:
        """Each component's schema version."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(schema_versions.c.component, schema_versions.c.version))
            return {row.component: row.version for row in rows}

    def close(self) -> None:
        self.engine.dispose()
