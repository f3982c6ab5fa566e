"""Patience with the state database: an operation cut off by a lost connection is tried again.

A PostgreSQL restart or failover, or a network blink, ends every open connection; SQLite may
stay locked by another writer longer than its busy timeout. Every store on the state database
(``orchestrator.core.state_db``) runs each of its operations through one ``StatePatience``: an
operation that fails because the connection was lost is tried again, with jittered exponential
backoff, for ``$SQLGATE_STATE_PATIENCE`` seconds (default 60); past that it ends in one
``StateDatabaseError`` sentence (exit 10 on the command line). Any other error is not retried.

A store operation is a unit that re-reads what it changes: writes are conditional (on status
and version, or an insert only one process can make), and a write whose commit went through
although its answer was lost recognises its own row when it is tried again (``RunStore``
``create``/``transition``, the approval store's ledger and decisions), so a retry never
applies a change twice.

Example:
    >>> waits = []
    >>> patience = StatePatience(5.0, sleep=waits.append, clock=lambda: 0.0, jitter=lambda: 0.0)
    >>> calls = []
    >>> def flaky():
    ...     calls.append(1)
    ...     if len(calls) < 3:
    ...         raise sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    ...     return "ok"
    >>> patience.call(flaky, "the state database")
    'ok'
    >>> waits
    [0.2, 0.4]
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

import sqlalchemy as sa
import tenacity

from approvals.retried import trying_again
from orchestrator.core.errors import ConfigurationError, StateDatabaseError

__all__ = [
    "DEFAULT_PATIENCE_S",
    "PATIENCE_ENV",
    "StatePatience",
    "connection_lost",
    "guard_beside",
    "patience_from_env",
]

log = logging.getLogger("sqlgate.state")

PATIENCE_ENV = "SQLGATE_STATE_PATIENCE"
DEFAULT_PATIENCE_S = 60.0
#: The first wait after a lost connection, and the longest wait between two tries (seconds).
FIRST_WAIT_S = 0.2
LONGEST_WAIT_S = 5.0

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

#: Where ``StatePatience.guard`` leaves (patience, what) on a store it guarded.
_GUARDED = "_sqlgate_state_patience"

#: Driver messages that say the connection (not the statement) failed.
_LOST = (
    "server closed the connection",
    "terminating connection",
    "connection refused",
    "connection is closed",
    "connection already closed",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "could not connect",
    "could not receive data",
    "could not send data",
    "connection timed out",
    "no connection to the server",
    "ssl connection has been closed",
    "consuming input failed",
    "database is locked",
    "lost connection",
    "server has gone away",
)


def connection_lost(exc: BaseException) -> bool:
    """True when ``exc`` says the state database could not be reached or the connection broke
    (the operation may be tried again), False for anything the statement itself caused."""
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        orig: BaseException | None = exc.orig
    else:
        orig = exc
    if orig is None:
        return False
    psycopg = _psycopg_errors()
    if psycopg is not None and isinstance(orig, psycopg):
        return True
    if isinstance(orig, sqlite3.OperationalError) or isinstance(exc, sa.exc.OperationalError):
        text = str(orig).lower()
        return any(marker in text for marker in _LOST)
    return False


@functools.cache
def _psycopg_errors() -> tuple[type[BaseException], ...] | None:
    """psycopg's errors that mean the server went away (psycopg is optional)."""
    try:
        from psycopg import errors
    except ImportError:
        return None
    return (
        errors.AdminShutdown,
        errors.CrashShutdown,
        errors.CannotConnectNow,
        errors.ConnectionFailure,
        errors.SqlclientUnableToEstablishSqlconnection,
        errors.OperatorIntervention,
    )


def patience_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``$SQLGATE_STATE_PATIENCE`` (seconds; 0 gives up at the first lost connection), else
    ``DEFAULT_PATIENCE_S``."""
    env = os.environ if environ is None else environ
    text = env.get(PATIENCE_ENV) or str(DEFAULT_PATIENCE_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise ConfigurationError(
            f"{PATIENCE_ENV} must be a number of seconds (0 or more), not {text!r}"
        )
    return seconds


class StatePatience:
    """Runs state-database operations, trying one again while its connection is lost.

    Args:
        patience_s: how long to go on trying after the first lost connection.
        sleep, clock: injected (tests pass fakes); ``clock`` is monotonic seconds.
        jitter: a number in [0, 1) that spreads the waits of many processes apart.
    """

    def __init__(
        self,
        patience_s: float,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.patience_s = patience_s
        self.sleep = sleep
        self.clock = clock
        self.jitter = jitter

    def _wait(self, state: tenacity.RetryCallState, left_s: float) -> float:
        base = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2 ** (state.attempt_number - 1))
        return max(0.0, min(round(base * (1 + self.jitter()), 3), left_s))

    def call(self, operation: Callable[[], R], what: str) -> R:
        """``operation()``, tried again while it fails on a lost connection; ``what`` names
        the database in the sentence of a ``StateDatabaseError`` after ``patience_s``."""
        started = self.clock()
        attempts = 0

        def attempt() -> R:
            nonlocal attempts
            attempts += 1
            with trying_again(attempts > 1):
                return operation()

        def out_of_patience(state: tenacity.RetryCallState) -> bool:
            return self.clock() - started >= self.patience_s

        def wait(state: tenacity.RetryCallState) -> float:
            return self._wait(state, started + self.patience_s - self.clock())

        def told(state: tenacity.RetryCallState) -> None:
            outcome = state.outcome
            error = outcome.exception() if outcome is not None else None
            log.log(
                logging.WARNING if state.attempt_number == 1 else logging.DEBUG,
                "%s: connection lost (%s); trying again for up to %g s",
                what,
                _first_line(error) if error is not None else "?",
                self.patience_s,
            )

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(connection_lost),
            stop=out_of_patience,
            wait=wait,
            sleep=self.sleep,
            before_sleep=told,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except (sa.exc.DBAPIError, sqlite3.Error) as exc:
            if not connection_lost(exc):
                raise
            waited = self.clock() - started
            raise StateDatabaseError(
                f"{what} cannot be reached (tried for {waited:.0f} s, "
                f"{PATIENCE_ENV}={self.patience_s:g}): {_first_line(exc)}"
            ) from None

    def wrap(self, function: Callable[P, R], what: str) -> Callable[P, R]:
        """``function`` with every call run through ``call``."""

        @functools.wraps(function)
        def patient(*args: P.args, **kwargs: P.kwargs) -> R:
            return self.call(lambda: function(*args, **kwargs), what)

        return patient

    def guard(self, store: object, what: str) -> None:
        """Run every public method of ``store`` (one operation on the state database each)
        through ``call``, in place: the store keeps its type, and its own calls of its public
        methods go through it too (an inner give-up is not retried by the outer one)."""
        for name, _ in inspect.getmembers(type(store), inspect.isfunction):
            if name.startswith("_") or name == "close":
                continue
            setattr(store, name, self.wrap(getattr(store, name), what))
        setattr(store, _GUARDED, (self, what))


def guard_beside(store: S, beside: object) -> S:
    """``store``, guarded by the patience that guards ``beside`` (a store on the same state
    database), so a store made from another one's engine is not the one that gives up at the
    first lost connection; unchanged when ``beside`` is not guarded."""
    found = getattr(beside, _GUARDED, None)
    if found is not None:
        patience, what = found
        patience.guard(store, what)
    return store


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    text = (lines[0] if lines else type(orig).__name__).strip().rstrip(".")
    return text[:200]
