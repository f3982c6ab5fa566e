"""The worker process of ``safety.sandbox``: one read-only SQLite or DuckDB connection under OS
limits, running one statement at a time for its parent.

Started as ``python -m safety.sandbox_worker FD``, where FD is its end of a socket pair. The
parent sends its configuration, the worker opens the database, caps its own address space
(``RLIMIT_AS``: what the engine mapped at start plus ``worker_memory_bytes``) and answers
``("ready", pid)``. Then, for each ``(sql, row_cap, timeout_s, cpu_s, max_bytes)`` it gets, it
sets a CPU-time limit (``RLIMIT_CPU``: the kernel ends the process with SIGXCPU past it) and the
engine's own deadline, fetches at most ``row_cap + 1`` rows and ``max_bytes`` counted bytes
(``safety.result_budget``) and answers with one of::

    ("rows", columns, rows, cut_by)   # cut_by: None, "rows" or "bytes"
    ("timeout" | "resource" | "failed", message)

Messages are pickled; the parent reads at most ``max_result_bytes`` of them. The worker exits
when its parent's end of the socket closes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import pickle
import resource
import sqlite3
import sys
import threading
import time
import uuid
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["main"]

# SQLite result codes whose meaning is "this statement wanted more than it may have".
_SQLITE_TOO_BIG = ("string or blob too big", "out of memory", "too many", "too long")


def main(fd: int) -> None:
    """Serve statements on the socket ``fd`` until the parent goes away."""
    channel = Connection(fd)
    config = pickle.loads(channel.recv_bytes())
    try:
        run = _open(config)
    except Exception as exc:  # the parent reports it as a setup error
        channel.send_bytes(pickle.dumps(("failed", f"{type(exc).__name__}: {exc}")))
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _cap_address_space(config["worker_memory_bytes"])
    channel.send_bytes(pickle.dumps(("ready", os.getpid())))
    while True:
        try:
            sql, row_cap, timeout_s, cpu_s, max_bytes = pickle.loads(channel.recv_bytes())
        except (EOFError, OSError):
            return
        _cap_cpu(cpu_s)
        try:
            reply = _rows_reply(run(sql, row_cap, timeout_s, max_bytes), config["max_result_bytes"])
        except MemoryError:
            reply = pickle.dumps(("resource", "the statement ran out of memory"))
        channel.send_bytes(reply)


def _open(config: dict[str, Any]) -> Any:
    from safety.readonly import (
        ReadOnlySettings,
        _ReadOnlySqliteConnection,
        duckdb_config,
        sqlite_authorizer,
        sqlite_readonly_connection,
    )

    settings = ReadOnlySettings.model_validate(config["settings"])
    if config["dialect"] == "sqlite":
        conn = sqlite_readonly_connection(config["url"], settings, time.monotonic)
        assert isinstance(conn, _ReadOnlySqliteConnection)
        # SQLite's own heap bound: past it a statement fails with "out of memory". The
        # authorizer, back in place, refuses PRAGMA hard_heap_limit to the statements run here.
        conn.set_authorizer(None)
        conn.execute(f"PRAGMA hard_heap_limit = {int(config['worker_memory_bytes'])}")
        conn.set_authorizer(sqlite_authorizer)
        return lambda sql, cap, timeout, size: _run_sqlite(conn, sql, cap, timeout, size)
    import duckdb
    from sqlalchemy.engine import make_url

    database = make_url(config["url"]).database or ":memory:"
    dconn = duckdb.connect(database, read_only=True, config=duckdb_config(settings))
    return lambda sql, cap, timeout, size: _run_duckdb(dconn, sql, cap, timeout, size)


def _run_sqlite(conn: Any, sql: str, row_cap: int, timeout_s: float, max_bytes: int) -> tuple:
    conn.deadline = time.monotonic() + timeout_s
    try:
        cursor = conn.execute(sql)
        return _fetch(cursor, row_cap, max_bytes)
    except sqlite3.Error as exc:
        text = str(exc)
        if text == "interrupted":
            return ("timeout", text)
        if any(part in text for part in _SQLITE_TOO_BIG):
            return ("resource", text)
        return ("failed", text)
    finally:
        conn.deadline = None
        if conn.in_transaction:
            conn.rollback()


def _run_duckdb(conn: Any, sql: str, row_cap: int, timeout_s: float, max_bytes: int) -> tuple:
    import duckdb

    timer = threading.Timer(timeout_s, conn.interrupt)
    timer.daemon = True
    timer.start()
    try:
        cursor = conn.execute(sql)
        return _fetch(cursor, row_cap, max_bytes)
    except duckdb.InterruptException as exc:
        return ("timeout", str(exc).splitlines()[0] if str(exc) else "interrupted")
    except duckdb.OutOfMemoryException as exc:
        return ("resource", str(exc).splitlines()[0])
    except duckdb.Error as exc:
        return ("failed", str(exc))
    finally:
        timer.cancel()


def _fetch(cursor: Any, row_cap: int, max_bytes: int) -> tuple:
    from safety.result_budget import fetch_bounded

    if cursor.description is None:
        return ("rows", [], [], None)
    columns = [str(d[0]) for d in cursor.description]
    fetched = fetch_bounded(cursor.fetchmany, row_cap, max_bytes)
    return ("rows", columns, [tuple(r) for r in fetched.rows], fetched.cut_by)


def _rows_reply(reply: tuple, max_bytes: int) -> bytes:
    if reply[0] == "rows":
        kind, columns, rows, truncated = reply
        reply = (kind, columns, [tuple(_plain(v) for v in row) for row in rows], truncated)
    data = pickle.dumps(reply)
    if len(data) > max_bytes:
        return pickle.dumps(
            ("resource", f"the result is larger than the {max_bytes} bytes a result may have")
        )
    return data


_PLAIN = (
    type(None),
    bool,
    int,
    float,
    str,
    bytes,
    decimal.Decimal,
    uuid.UUID,
    dt.date,
    dt.time,
    dt.timedelta,
)


def _plain(value: Any) -> Any:
    """A value of the types the parent accepts (see ``sandbox.RESULT_TYPES``); others as text."""
    if isinstance(value, _PLAIN):
        if isinstance(value, (dt.datetime, dt.time)) and not isinstance(
            value.tzinfo, (type(None), dt.timezone)
        ):
            return value.astimezone(dt.UTC) if isinstance(value, dt.datetime) else str(value)
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _vm_size() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()


def _cap_address_space(extra: int) -> None:
    try:
        base = _vm_size()
    except OSError:  # no /proc: fall back to the bound alone
        base = 0
    limit = base + int(extra)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _cap_cpu(seconds: float) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(spent + seconds)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


if __name__ == "__main__":
    main(int(sys.argv[1]))
