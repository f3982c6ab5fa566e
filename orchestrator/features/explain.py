"""The engine's own estimate of a statement, taken without running it, under execution's bounds.

``explain(engine, dialect, sql)`` asks the planner only: PostgreSQL ``EXPLAIN (FORMAT JSON)``,
MySQL/MariaDB ``EXPLAIN``, DuckDB ``EXPLAIN (FORMAT JSON)``, SQLite ``EXPLAIN QUERY PLAN``. None
of them runs the statement (no ``ANALYZE``), but planning is not free: planners fold constant
expressions, so ``EXPLAIN SELECT len(range(400000000))`` builds the list on DuckDB, and
PostgreSQL calls an ``IMMUTABLE`` function with constant arguments. It happens before anyone
approved the statement, so it gets the bounds execution gets:

- SQLite and DuckDB: the plan is asked in a worker of ``safety.sandbox`` (address space, CPU
  time, the statement timeout, the worker killed past it), never in the calling process; also
  when the settings run approved statements in-process (``sandbox_workers = 0``).
- PostgreSQL and MySQL/MariaDB: on the read-only engine of ``safety.readonly``, whose every
  transaction is read-only under the statement timeout and a memory bound (PostgreSQL
  ``statement_timeout`` and ``work_mem`` set locally; MySQL ``max_execution_time``, MariaDB
  ``max_statement_time``, in-memory temporary tables bounded). A server that has not answered
  a grace after that timeout (MariaDB does not check it while matching a regular expression)
  is asked to cancel, and the caller returns at once.

Only statements the validator accepted reach here (the approval gate assesses those alone). A
planner error, a timeout or a memory stop is reported, never raised; ``stopped`` says the planner
was stopped for its cost, which the risk rules count as high.

Example:
    >>> import sqlite3, tempfile, os
    >>> from safety import open_readonly_engine
    >>> path = os.path.join(tempfile.mkdtemp(), "shop.db")
    >>> db = sqlite3.connect(path); _ = db.execute("create table orders(id integer primary key, total)")
    >>> db.commit(); db.close()
    >>> plan = explain(open_readonly_engine(f"sqlite:///{path}"), "sqlite", "SELECT total FROM orders LIMIT 5")
    >>> plan.full_scans, plan.summary
    (['orders'], 'SCAN orders')
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection, Engine

from safety.errors import ResourceLimitExceeded, SafetyError, StatementTimeout
from safety.sandbox import planner_sandbox

__all__ = ["PlanEstimate", "explain"]

_SUMMARY_CHARS = 300
# A plan is short: SQLite states one row per loop or subquery, DuckDB one JSON document.
_PLAN_ROWS = 500
_PLAN_BYTES = 4 * 1024 * 1024
# Server errors that mean "stopped for its cost": PostgreSQL SQLSTATE classes and codes, and
# MySQL/MariaDB error numbers (statement time limits, interruption, memory, regexp limits).
_PG_CANCELLED = "57014"  # statement_timeout
_PG_STOPPED_CLASSES = ("53", "54")  # insufficient resources, program limit exceeded
_MYSQL_STOPPED = frozenset({1028, 1037, 1038, 1041, 1317, 1969, 3024, 3698, 3699})
# How long a server may take to give a connection, and the bound assumed where none is in force.
_CONNECT_WAIT_S = 30.0
_DEFAULT_BOUND_S = 10.0


@dataclass(frozen=True)
class PlanEstimate:
    """What the planner said: rows it expects (None: it does not say), tables read end to end,
    a one-line summary, and the error when it said nothing; ``stopped`` when that error is a
    bound (time or memory) stopping the planner."""

    rows: int | None = None
    full_scans: list[str] = field(default_factory=list)
    summary: str | None = None
    error: str | None = None
    stopped: bool = False


Reader = Callable[[Sequence[Any]], PlanEstimate]


def explain(engine: Engine, dialect: str, sql: str) -> PlanEstimate:
    """The planner's estimate of ``sql`` on ``engine`` (never executed; errors are returned)."""
    readers: dict[str, Reader] = {
        "postgres": _postgres,
        "mysql": _mysql,
        "duckdb": _duckdb,
        "sqlite": _sqlite,
    }
    reader = readers.get(dialect)
    if reader is None:
        return PlanEstimate(error=f"no planner estimate for {dialect}")
    if dialect in ("sqlite", "duckdb"):
        return _in_sandbox(engine, dialect, sql, reader)
    return _on_server(engine, dialect, sql, reader)


def _in_sandbox(engine: Engine, dialect: str, sql: str, reader: Reader) -> PlanEstimate:
    try:
        sandbox = planner_sandbox(engine)
    except SafetyError as exc:
        return PlanEstimate(error=_one_line(exc))
    try:
        result = sandbox.run(_prefix(dialect) + sql, _PLAN_ROWS, max_bytes=_PLAN_BYTES)
    except StatementTimeout:
        return PlanEstimate(
            error=f"planning ran past the {sandbox.settings.statement_timeout_s:g} s statement "
            "timeout and was stopped",
            stopped=True,
        )
    except ResourceLimitExceeded as exc:
        return PlanEstimate(error=f"planning was stopped for its cost ({exc})", stopped=True)
    except SafetyError as exc:  # the planner's own error, or the worker could not start
        return PlanEstimate(error=_one_line(exc))
    if result.cut_by == "bytes":
        return PlanEstimate(error="the plan was larger than a plan may be")
    return _read(reader, result.rows)


class _ServerPlan:
    """One ``EXPLAIN`` on a server, asked on a thread of its own so that the caller can stop
    waiting: a server does not always notice its own time limit (MariaDB matching a regular
    expression while optimising), and the caller must not wait longer than execution would."""

    def __init__(self, engine: Engine, dialect: str, sql: str) -> None:
        self.engine = engine
        self.dialect = dialect
        self.sql = sql
        self.bound_s: float | None = None  # the statement timeout in force on the connection
        self.raw: Any = None
        self.rows: list[Any] | None = None
        self.error: BaseException | None = None
        self.started = threading.Event()
        self.done = threading.Event()

    def ask(self) -> None:
        try:
            with self.engine.connect() as conn:
                try:
                    self.bound_s = _bound_in_force(conn, self.dialect)
                    self.raw = conn.connection.dbapi_connection
                    self.started.set()
                    self.rows = list(conn.exec_driver_sql(_prefix(self.dialect) + self.sql))
                finally:
                    conn.rollback()
        except Exception as exc:  # drivers raise their own types (timeouts, syntax, permissions)
            self.error = exc
        finally:
            self.started.set()
            self.done.set()

    def cancel(self) -> None:
        """Ask the server to stop the statement; the caller does not wait for it."""
        try:
            if self.dialect == "postgres":
                self.raw.cancel()
            elif self.dialect == "mysql":
                with self.engine.connect() as conn:
                    conn.exec_driver_sql(f"KILL QUERY {int(self.raw.thread_id())}")
        except Exception:  # noqa: S110 - best effort: the caller has already stopped waiting
            pass


def _on_server(engine: Engine, dialect: str, sql: str, reader: Reader) -> PlanEstimate:
    plan = _ServerPlan(engine, dialect, sql)
    threading.Thread(target=plan.ask, name="sqlgate-explain", daemon=True).start()
    plan.started.wait(_CONNECT_WAIT_S)
    bound = plan.bound_s or _DEFAULT_BOUND_S
    if not plan.done.wait(bound + min(2.0, max(0.2, 0.25 * bound))):
        plan.cancel()
        return PlanEstimate(
            error=f"planning ran past the {bound:g} s statement timeout and was stopped",
            stopped=True,
        )
    if plan.error is not None and _server_stopped(plan.error):
        return PlanEstimate(
            error=f"planning was stopped for its cost ({_one_line(plan.error)})", stopped=True
        )
    if plan.error is not None:
        return PlanEstimate(error=_one_line(plan.error))
    return _read(reader, plan.rows or [])


def _bound_in_force(conn: Connection, dialect: str) -> float | None:
    """The statement timeout (seconds) the read-only session put on this transaction."""
    if dialect == "postgres":
        query = "SELECT EXTRACT(EPOCH FROM current_setting('statement_timeout')::interval)"
    elif "mariadb" in str(conn.exec_driver_sql("SELECT VERSION()").scalar()).lower():
        query = "SELECT @@max_statement_time"
    else:
        query = "SELECT @@max_execution_time / 1000"
    value = conn.exec_driver_sql(query).scalar()
    return float(value) if value else None


def _read(reader: Reader, rows: Sequence[Any]) -> PlanEstimate:
    try:
        return reader(rows)
    except (LookupError, TypeError, ValueError) as exc:  # a plan shaped otherwise than expected
        return PlanEstimate(error=f"the plan could not be read ({type(exc).__name__})")


def _server_stopped(exc: BaseException) -> bool:
    """Whether a PostgreSQL or MySQL/MariaDB error is a bound stopping the statement."""
    orig = getattr(exc, "orig", None) or exc
    number = next(iter(getattr(orig, "args", ())), None)  # pymysql: (errno, message)
    if isinstance(number, int):
        return number in _MYSQL_STOPPED
    state = getattr(orig, "sqlstate", None)  # psycopg
    return isinstance(state, str) and (state == _PG_CANCELLED or state[:2] in _PG_STOPPED_CLASSES)


def _prefix(dialect: str) -> str:
    return {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "duckdb": "EXPLAIN (FORMAT JSON) ",
        "mysql": "EXPLAIN ",
        "sqlite": "EXPLAIN QUERY PLAN ",
    }[dialect]


def _postgres(rows: Sequence[Any]) -> PlanEstimate:
    document = rows[0][0]
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    scans = sorted(
        {
            str(node["Relation Name"])
            for node in _walk(plan, "Plans")
            if node.get("Node Type") == "Seq Scan" and node.get("Relation Name")
        }
    )
    estimated = int(plan.get("Plan Rows", 0))
    summary = f"{plan.get('Node Type')}: cost {plan.get('Total Cost')}, {estimated} rows" + (
        f"; full scan of {', '.join(scans)}" if scans else ""
    )
    return PlanEstimate(rows=estimated, full_scans=scans, summary=summary)


def _mysql(rows: Sequence[Any]) -> PlanEstimate:
    # id, select_type, table, (partitions), type, possible_keys, key, key_len, ref, rows, ...
    keys = [k.lower() for k in rows[0]._mapping.keys()] if rows else []
    records = [dict(zip(keys, row, strict=False)) for row in rows]
    scans = sorted(
        {
            str(r["table"])
            for r in records
            if str(r.get("type") or "").upper() == "ALL"
            and r.get("table")
            and not str(r["table"]).startswith("<")
        }
    )
    outer = [r for r in records if str(r.get("id")) == str(records[0].get("id"))] if records else []
    estimated: int | None = None
    for r in outer:
        if r.get("rows") is not None:
            estimated = (estimated or 1) * int(r["rows"])
    steps = ", ".join(f"{r.get('table')} {r.get('type') or '-'} ~{r.get('rows')}" for r in records)
    return PlanEstimate(rows=estimated, full_scans=scans, summary=steps[:_SUMMARY_CHARS] or None)


def _duckdb(rows: Sequence[Any]) -> PlanEstimate:
    document = json.loads(rows[0][1])
    nodes = [n for root in document for n in _walk(root, "children")]
    scans = sorted(
        {
            str(n["extra_info"]["Table"]).split(".")[-1]
            for n in nodes
            if "SCAN" in str(n.get("name"))
            and isinstance(n.get("extra_info"), dict)
            and n["extra_info"].get("Table")
        }
    )
    # The node nearest the root that states a cardinality; a LIMIT node states 0 for "unknown".
    stated = [
        int(n["extra_info"]["Estimated Cardinality"])
        for n in nodes
        if isinstance(n.get("extra_info"), dict)
        and str(n["extra_info"].get("Estimated Cardinality", "")).isdigit()
    ]
    estimated = next((c for c in stated if c > 0), 0 if stated else None)
    shape = " <- ".join(str(n.get("name")) for n in nodes[:6])
    summary = f"{shape}; ~{estimated} rows" if estimated is not None else shape
    return PlanEstimate(rows=estimated, full_scans=scans, summary=summary[:_SUMMARY_CHARS])


def _sqlite(rows: Sequence[Any]) -> PlanEstimate:
    details = [str(row[-1]) for row in rows]
    scans = sorted(
        {
            d.split()[1]
            for d in details
            if d.startswith("SCAN ") and not d.startswith(("SCAN CONSTANT", "SCAN (")) and " " in d
        }
    )
    return PlanEstimate(full_scans=scans, summary="; ".join(details)[:_SUMMARY_CHARS] or None)


def _walk(node: dict[str, Any], children: str) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get(children) or ():
        yield from _walk(child, children)


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
