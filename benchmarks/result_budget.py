"""Resident memory of sqlgate's process while one statement returns 300 rows of a megabyte each.

Run: .venv/bin/python benchmarks/result_budget.py [--rows 300] [--size 1000000]

For each engine it can reach (SQLite and DuckDB in-process, PostgreSQL and MariaDB/MySQL from
``SQLGATE_TEST_POSTGRES_URL`` / ``SQLGATE_TEST_MYSQL_URL``), it runs the statement through
``SQLExecutor`` in a fresh process, twice: with a 3 MB byte budget and with a 1 GB one (about
what a row cap alone allowed), and prints how much the process's peak resident size grew during
the statement (``ru_maxrss`` after minus before), the rows kept and what cut them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, resource, sqlite3, sys
sys.path.insert(0, sys.argv[1])
from agents.sql_executor import SQLExecutor
from safety import ReadOnlySettings, open_readonly_engine
from safety.statement import _minted as unchecked
url, sql, budget, dialect = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
settings = ReadOnlySettings(statement_timeout_s=60, sandbox_workers=0, max_value_bytes=8_000_000)
engine = open_readonly_engine(url, settings)
executor = SQLExecutor(engine, row_cap=100_000, max_result_bytes=budget)
executor.run(unchecked("SELECT 1 AS one", dialect, None))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = executor.run(unchecked(sql, dialect, None))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_mb": (after - before) / 1024, "rows": result.row_count, "cut": result.cut_by}))
"""


def targets(rows: int, size: int, folder: Path) -> list[tuple[str, str, str, str]]:
    """(label, url, statement, dialect) for every engine reachable here."""
    import sqlite3

    import duckdb

    sqlite_path = folder / "b.db"
    sqlite3.connect(sqlite_path).execute("CREATE TABLE t (a INTEGER)").connection.commit()
    duck_path = folder / "b.duckdb"
    duckdb.connect(str(duck_path)).execute("CREATE TABLE t (a INTEGER)").close()
    found = [
        (
            "SQLite (in-process)",
            f"sqlite:///{sqlite_path}",
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows}) "
            f"SELECT printf('%.*c', {size}, 'x') AS v FROM n",
            "sqlite",
        ),
        (
            "DuckDB (in-process)",
            f"duckdb:///{duck_path}",
            f"SELECT repeat('x', {size}) AS v FROM range({rows})",
            "duckdb",
        ),
    ]
    postgres = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
    if postgres:
        found.append(
            (
                "PostgreSQL",
                postgres,
                f"SELECT repeat('x', {size}) AS v FROM generate_series(1, {rows})",
                "postgres",
            )
        )
    mysql = os.environ.get("SQLGATE_TEST_MYSQL_URL")
    if mysql:
        found.append(
            ("MariaDB", mysql, f"SELECT REPEAT('x', {size}) AS v FROM seq_1_to_{rows}", "mysql")
        )
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--size", type=int, default=1_000_000)
    args = parser.parse_args()
    total_mb = args.rows * args.size / 1e6
    print(f"{args.rows} rows x {args.size:,} bytes ({total_mb:,.0f} MB) through SQLExecutor")
    print(f"{'engine':22s} {'budget':>8s} {'peak RSS growth':>16s} {'rows kept':>10s}  cut by")
    with tempfile.TemporaryDirectory() as tmp:
        for label, url, sql, dialect in targets(args.rows, args.size, Path(tmp)):
            for budget in (3_000_000, 1_000_000_000):
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(ROOT), url, sql, str(budget), dialect],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if done.returncode != 0:
                    print(f"{label:22s} {budget / 1e6:>6.0f}MB  failed: {done.stderr[-200:]}")
                    continue
                got = json.loads(done.stdout.strip().splitlines()[-1])
                print(
                    f"{label:22s} {budget / 1e6:>6.0f}MB {got['grew_mb']:>13.1f} MB "
                    f"{got['rows']:>10d}  {got['cut'] or '-'}"
                )


if __name__ == "__main__":
    main()
