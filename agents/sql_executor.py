"""SQLExecutor: runs one approved statement and returns its rows, capped and JSON-safe.

The engine comes in already read-only with its statement timeout set (``safety``); the
executor's job is to refuse SQL checked in another dialect than its engine's, to run SQLite and
DuckDB statements in a ``safety.sandbox`` worker process (bounded memory and CPU, killed at the
timeout), the row cap, values that survive ``json.dumps``, and errors that say plainly what went
wrong (a timeout, a cost limit, an unreachable database, or anything else).
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import math
import re
import time
import uuid
from collections.abc import Callable
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from agents.errors import ExecutionError
from safety import (
    QuerySandbox,
    ReadOnlySetupError,
    ResourceLimitExceeded,
    StatementFailed,
    StatementTimeout,
    ValidatedStatement,
    ValidationResult,
    dialect_for_url,
    is_statement_timeout,
    sandbox_for,
)
from safety.error_text import error_class, error_code
from safety.result_budget import DEFAULT_MAX_RESULT_BYTES, Fetched, fetch_bounded
from safety.value_bound import MARKER as VALUE_MARKER

__all__ = ["ExecutionResult", "SQLExecutor", "clean_message", "json_safe"]


MAX_MESSAGE_CHARS = 1000

log = logging.getLogger(__name__)


class ExecutionResult(BaseModel):
    """The rows of one statement, at most ``row_cap`` of them."""

    columns: list[str] = Field(default_factory=list, description="Column labels in result order")
    rows: list[list[Any]] = Field(
        default_factory=list, description="Rows as lists of JSON-safe values"
    )
    row_count: int = Field(default=0, description="Number of rows returned (at most row_cap)")
    truncated: bool = Field(
        default=False,
        description="True when rows were cut: the statement had more rows than row_cap (the "
        "executor's cap, or the LIMIT the safety policy added or lowered)",
    )
    row_cap: int = Field(default=1000, description="The most rows kept")
    byte_cap: int = Field(
        default=DEFAULT_MAX_RESULT_BYTES,
        description="The most bytes of rows kept (the policy's max_result_bytes)",
    )
    cut_by: Literal["rows", "bytes"] | None = Field(
        default=None,
        description="What cut a truncated result: the row cap, or the byte budget",
    )
    duration_s: float = Field(default=0.0, description="Wall time to run and fetch, in seconds")

    def summary(self) -> str:
        more = ""
        if self.truncated:
            more = (
                f", truncated at {self.byte_cap} bytes"
                if self.cut_by == "bytes"
                else f", truncated at {self.row_cap}"
            )
        return (
            f"{self.row_count} rows x {len(self.columns)} columns in {self.duration_s:.3f} s{more}"
        )


class SQLExecutor:
    """Runs exactly the SQL it is given, once, and fetches at most ``row_cap + 1`` rows.

    It runs only what a validator accepted: a ``safety.ValidatedStatement`` (or the
    ``ValidationResult`` that carries one), never SQL text, so nothing reaches the database
    that skipped the rules. The text goes to the driver untouched (no bind-parameter parsing),
    so ``':x'`` and ``'%'`` inside literals stay literals. The executor knows its engine's
    dialect and refuses a statement checked in another one before touching the database. An
    engine from ``safety.open_readonly_engine`` on SQLite or DuckDB runs its statements in that
    database's ``safety.sandbox`` worker processes (or in ``sandbox``, when given).

    Args:
        engine: the database; its URL gives the executor's dialect.
        row_cap: the most rows kept; ``truncated`` is True exactly when more existed. The
            statement's ``row_limit`` (the policy's) counts too: the smaller of the two is kept.
        max_result_bytes: the most bytes of rows kept (``safety.result_budget``): rows are
            streamed (server-side cursors on PostgreSQL and MariaDB/MySQL) and the fetch stops
            at the row that would pass it; the result is then ``truncated`` with
            ``cut_by="bytes"``.
        redact_errors: reduce the database's error text to its error class
            (``safety.error_text``) before it leaves the executor, for policies that protect
            columns: engines quote values in their errors. The full text is logged at debug
            level only.
        clock: where ``duration_s`` comes from.
        sandbox: the worker pool to run in; default: the engine's own, if it has one.

    Example:
        >>> from safety import SqlValidator
        >>> ex = SQLExecutor(sa.create_engine("sqlite://"), row_cap=2)
        >>> checked = SqlValidator("sqlite").validate("SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3")
        >>> res = ex.run(checked)
        >>> res.rows, res.truncated
        ([[1], [2]], True)
        >>> ex.run("SELECT 1")
        Traceback (most recent call last):
        ...
        agents.errors.ExecutionError: SQL text is never run: ...
    """

    def __init__(
        self,
        engine: Engine,
        row_cap: int = 1000,
        clock: Callable[[], float] = time.perf_counter,
        *,
        sandbox: QuerySandbox | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        redact_errors: bool = False,
    ) -> None:
        if row_cap < 1:
            raise ValueError("row_cap must be at least 1")
        if max_result_bytes < 1:
            raise ValueError("max_result_bytes must be at least 1")
        self.engine = engine
        self.row_cap = row_cap
        self.max_result_bytes = max_result_bytes
        self.redact_errors = redact_errors
        self.clock = clock
        self.dialect = dialect_for_url(engine.url.drivername)
        self.sandbox = sandbox if sandbox is not None else sandbox_for(engine)

    def run(
        self, statement: ValidatedStatement | ValidationResult, *, row_limit: int | None = None
    ) -> ExecutionResult:
        """Run ``statement`` and return its rows.

        ``statement`` is what a ``SqlValidator`` accepted (``ValidationResult.statement``, or
        the result itself). Anything else, SQL text above all, is refused
        (``unchecked_statement``): nothing runs that skipped the validator.

        The statement's ``row_limit`` (or ``row_limit`` here, when given) is the validator's:
        a LIMIT the safety policy added or lowered is one more than it, so keeping
        ``min(row_cap, row_limit)`` rows and fetching one more tells whether the policy's LIMIT
        cut the result (a LIMIT the question asked for, at most ``row_limit``, never reads as
        cut).

        Raises:
            ExecutionError: code ``unchecked_statement`` (not a validated statement; nothing
                ran), ``dialect_mismatch`` (checked in another dialect than the engine's;
                nothing ran), ``refused_statement`` (a validator result that was refused),
                ``statement_timeout`` (``timed_out``), ``resource_limit`` (stopped for memory,
                CPU time or size; ``timed_out`` too, so the question ends),
                ``database_unreachable`` or ``execution_error``.
        """
        checked = self._checked(statement)
        sql = checked.sql
        limit = row_limit if row_limit is not None else checked.row_limit
        keep = self.row_cap if limit is None else max(1, min(self.row_cap, limit))
        started = self.clock()
        if self.sandbox is not None:
            columns, fetched = self._run_sandboxed(self.sandbox, sql, keep)
        else:
            columns, fetched = self._run_here(sql, keep)
        rows = [[json_safe(v) for v in row] for row in fetched.rows]
        return ExecutionResult(
            columns=columns,
            rows=rows,
            row_count=len(rows),
            truncated=fetched.truncated,
            row_cap=keep,
            byte_cap=self.max_result_bytes,
            cut_by=fetched.cut_by,
            duration_s=max(0.0, self.clock() - started),
        )

    def _checked(self, statement: object) -> ValidatedStatement:
        if isinstance(statement, ValidationResult):
            if not statement.ok:
                raise ExecutionError(
                    "refused_statement", "the validator refused this statement; nothing was run"
                )
            statement = statement.statement
        if not isinstance(statement, ValidatedStatement):
            raise ExecutionError(
                "unchecked_statement",
                "SQL text is never run: only a statement a validator accepted "
                "(SqlValidator.validate(...).statement). Nothing was run.",
            )
        if statement.dialect != self.dialect:
            raise ExecutionError(
                "dialect_mismatch",
                f"the statement was validated as {statement.dialect} but this database speaks "
                f"{self.dialect}; validate it again as {self.dialect}. Nothing was run.",
            )
        return statement

    def _run_here(self, sql: str, keep: int) -> tuple[list[str], Fetched]:
        try:
            conn = self.engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise ExecutionError("database_unreachable", clean_message(exc)) from exc
        try:
            with conn:
                # Server-side cursor where the driver has one; no rows buffered ahead of the
                # budget (``max_row_buffer``), so only what fetch_bounded asks for is held.
                result = conn.execution_options(
                    no_parameters=True, stream_results=True, max_row_buffer=1
                ).exec_driver_sql(sql)
                if result.returns_rows:
                    columns = [str(k) for k in result.keys()]
                    fetched = fetch_bounded(result.fetchmany, keep, self.max_result_bytes)
                else:
                    columns, fetched = [], Fetched()
                if fetched.truncated and self.dialect == "mysql":
                    # pymysql drains an unbuffered result on close (every row the server still
                    # sends): detach the cursor and drop the connection instead.
                    cursor = getattr(result, "cursor", None)
                    pending = getattr(cursor, "_result", None)
                    if pending is not None and hasattr(pending, "unbuffered_active"):
                        pending.unbuffered_active = False
                    if cursor is not None and hasattr(cursor, "connection"):
                        cursor.connection = None
                    conn.invalidate()
                result.close()
        except sa.exc.SQLAlchemyError as exc:
            raise self._error(exc) from exc
        return columns, fetched

    def _run_sandboxed(
        self, sandbox: QuerySandbox, sql: str, keep: int
    ) -> tuple[list[str], Fetched]:
        try:
            got = sandbox.run(sql, keep, max_bytes=self.max_result_bytes)
        except StatementTimeout as exc:
            raise ExecutionError("statement_timeout", exc.message, timed_out=True) from exc
        except ResourceLimitExceeded as exc:
            raise ExecutionError("resource_limit", exc.message, timed_out=True) from exc
        except StatementFailed as exc:
            raise ExecutionError("execution_error", self._message(exc)) from exc
        except ReadOnlySetupError as exc:
            raise ExecutionError("database_unreachable", exc.message) from exc
        return got.columns, Fetched(list(got.rows), cut_by=got.cut_by)

    def _message(self, exc: BaseException) -> str:
        """The error text the caller may see: whole, or its class when values must not leak."""
        message = clean_message(exc)
        if not self.redact_errors:
            return message
        log.debug("statement failed (text withheld from the caller): %s", message)
        return error_class(message, error_code(exc))

    def _error(self, exc: sa.exc.SQLAlchemyError) -> ExecutionError:
        over = _OVER_BUDGET.search(str(getattr(exc, "orig", exc)))
        if over is not None:  # safety.value_bound: the server refused to send a row that large
            return ExecutionError(
                "value_over_budget",
                f"A result row is larger than the result budget ({self.max_result_bytes} bytes); "
                f"nothing of it was sent. Select less of it: a shorter part of long text "
                f"(left(...)), or fewer columns.",
            )
        if is_statement_timeout(exc):
            return ExecutionError("statement_timeout", clean_message(exc), timed_out=True)
        if getattr(exc, "connection_invalidated", False):
            return ExecutionError("database_unreachable", self._message(exc))
        return ExecutionError("execution_error", self._message(exc))


_OVER_BUDGET = re.compile(re.escape(VALUE_MARKER))
_DECLARE_CURSOR = re.compile(r'DECLARE "[^"]+" (?:NO SCROLL )?CURSOR (?:WITHOUT HOLD )?FOR ')


def clean_message(exc: BaseException) -> str:
    """The driver's message on one line: no SQLAlchemy preamble, caret lines or repeated SQL."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        text = str(exc).split("\n[SQL:", 1)[0].split("\n(Background", 1)[0]
    elif len(orig.args) == 2 and isinstance(orig.args[0], int) and isinstance(orig.args[1], str):
        text = f"{orig.args[1]} (error {orig.args[0]})"  # pymysql: (errno, message)
    else:
        text = str(orig)
    text = _DECLARE_CURSOR.sub("", text)  # the server-side cursor's wrapper, not the statement
    lines = [line.strip() for line in text.splitlines()]
    kept = [line for line in lines if line and set(line) - {"^", " ", "~"}]
    one = " ".join(" ".join(kept).split())
    if not one:
        one = type(orig or exc).__name__
    return one if len(one) <= MAX_MESSAGE_CHARS else one[: MAX_MESSAGE_CHARS - 3] + "..."


def json_safe(value: Any) -> Any:
    """A value ``json.dumps`` accepts and a person reads the same way.

    Example:
        >>> json_safe(decimal.Decimal("12.50")), json_safe(dt.date(2025, 1, 31)), json_safe(b"\\x01\\xff")
        (12.5, '2025-01-31', '01ff')
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        if value == value.to_integral_value() and abs(value) < 2**53:
            return int(value)
        as_float = float(value)
        # keep exactness: a decimal with more digits than a double holds stays a string
        return as_float if decimal.Decimal(repr(as_float)) == value else str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    return str(value)
