"""The engine's own estimate of a statement, taken without running it.

``explain(engine, dialect, sql)`` asks the planner only: PostgreSQL ``EXPLAIN (FORMAT JSON)``,
MySQL/MariaDB ``EXPLAIN``, DuckDB ``EXPLAIN (FORMAT JSON)``, SQLite ``EXPLAIN QUERY PLAN``. None
of them runs the statement (no ``ANALYZE``). The engine is the read-only one of
``TargetDatabase``, so the estimate runs in a read-only transaction under the policy's statement
timeout like any query. A planner error or a timeout is reported, never raised: the reviewer
then sees "no estimate" and the policy decides what that is worth.

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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

__all__ = ["PlanEstimate", "explain"]

_SUMMARY_CHARS = 300


@dataclass(frozen=True)
class PlanEstimate:
    """What the planner said: rows it expects (None: it does not say), tables read end to end,
    a one-line summary, and the error when it said nothing."""

    rows: int | None = None
    full_scans: list[str] = field(default_factory=list)
    summary: str | None = None
    error: str | None = None


def explain(engine: Engine, dialect: str, sql: str) -> PlanEstimate:
    """The planner's estimate of ``sql`` on ``engine`` (never executed; errors are returned)."""
    readers = {
        "postgres": _postgres,
        "mysql": _mysql,
        "duckdb": _duckdb,
        "sqlite": _sqlite,
    }
    reader = readers.get(dialect)
    if reader is None:
        return PlanEstimate(error=f"no planner estimate for {dialect}")
    try:
        with engine.connect() as conn:
            try:
                rows = list(conn.exec_driver_sql(_prefix(dialect) + sql).fetchall())
            finally:
                conn.rollback()
        return reader(rows)
    except Exception as exc:  # drivers raise their own types (timeouts, syntax, permissions)
        return PlanEstimate(error=_one_line(exc))


def _prefix(dialect: str) -> str:
    return {
        "postgres": "EXPLAIN (FORMAT JSON) ",
        "duckdb": "EXPLAIN (FORMAT JSON) ",
        "mysql": "EXPLAIN ",
        "sqlite": "EXPLAIN QUERY PLAN ",
    }[dialect]


def _postgres(rows: list[Any]) -> PlanEstimate:
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


def _mysql(rows: list[Any]) -> PlanEstimate:
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


def _duckdb(rows: list[Any]) -> PlanEstimate:
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


def _sqlite(rows: list[Any]) -> PlanEstimate:
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
