"""Errors raised by the safety package.

Every error carries a stable, machine-readable ``code``.

    SafetyError                      code="safety_error"
    ├── UnsupportedDialect           code="unsupported_dialect"
    ├── ReadOnlySetupError           code="readonly_setup_failed"
    ├── PolicyError                  code="invalid_policy"
    ├── StatementTimeout             code="statement_timeout"
    ├── ResourceLimitExceeded        code="resource_limit"
    ├── StatementFailed              code="statement_failed"
    └── UnregisteredFindingCode      code="unregistered_finding_code"

Refusals of SQL text are not exceptions: ``SqlValidator.validate`` returns a
``ValidationResult`` whose findings carry their own codes.
"""

from __future__ import annotations

import sqlite3

__all__ = [
    "PolicyError",
    "ReadOnlySetupError",
    "ResourceLimitExceeded",
    "SafetyError",
    "StatementFailed",
    "StatementTimeout",
    "UnregisteredFindingCode",
    "UnsupportedDialect",
    "is_statement_timeout",
]


class SafetyError(Exception):
    """Base class of every error raised by ``safety``."""

    code = "safety_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnsupportedDialect(SafetyError):
    """A database URL or dialect name that sqlgate cannot guard."""

    code = "unsupported_dialect"


class ReadOnlySetupError(SafetyError):
    """A read-only engine could not be built for the given URL."""

    code = "readonly_setup_failed"


class PolicyError(SafetyError):
    """A policy file (or policy data) that is malformed; the message names the key."""

    code = "invalid_policy"

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class StatementTimeout(SafetyError):
    """A statement ran past the configured statement timeout."""

    code = "statement_timeout"


class ResourceLimitExceeded(SafetyError):
    """A statement was stopped for its cost: memory, CPU time, or the size of a value or result."""

    code = "resource_limit"


class StatementFailed(SafetyError):
    """The engine refused or failed a statement run in a sandbox worker; the message is the
    engine's own."""

    code = "statement_failed"


class UnregisteredFindingCode(SafetyError, ValueError):
    """A finding was made with a code ``safety/codes.py`` does not register: a programming error,
    raised loudly (never turned into a refusal) so that a new code cannot ship without a kind."""

    code = "unregistered_finding_code"


# MySQL ER_QUERY_TIMEOUT (max_execution_time), MariaDB ER_STATEMENT_TIMEOUT (max_statement_time),
# and ER_QUERY_INTERRUPTED (1317, a statement killed by the server's timer).
_MYSQL_TIMEOUT_ERRNOS = frozenset({3024, 1969, 1317})
_POSTGRES_QUERY_CANCELED = "57014"


def is_statement_timeout(exc: BaseException) -> bool:
    """True when ``exc`` (or the driver error it wraps) means "statement timeout reached".

    Understands SQLAlchemy wrappers and the errors of every supported driver: PostgreSQL
    SQLSTATE 57014, MySQL 3024 / MariaDB 1969, an interrupted SQLite or DuckDB statement.

    Example:
        >>> is_statement_timeout(StatementTimeout("slow"))
        True
        >>> is_statement_timeout(ValueError("x"))
        False
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _is_timeout_leaf(current):
            return True
        current = getattr(current, "orig", None) or current.__cause__
    return False


def _is_timeout_leaf(exc: BaseException) -> bool:
    if isinstance(exc, StatementTimeout):
        return True
    if getattr(exc, "sqlstate", None) == _POSTGRES_QUERY_CANCELED:
        return True
    if getattr(getattr(exc, "diag", None), "sqlstate", None) == _POSTGRES_QUERY_CANCELED:
        return True
    args = getattr(exc, "args", ())
    module = type(exc).__module__ or ""
    if module.startswith("pymysql") and args and args[0] in _MYSQL_TIMEOUT_ERRNOS:
        return True
    if isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted":
        return True
    if "duckdb" in module and type(exc).__name__ == "InterruptException":
        return True
    return False
