"""One huge value on PostgreSQL: peak resident memory of sqlgate's process and time to the end.

Run: SQLGATE_TEST_POSTGRES_URL=... .venv/bin/python benchmarks/pg_large_value.py [--budget 67108864]
     [--timeout 30] [--control]

Each statement is validated by ``SqlValidator`` under a policy whose ``max_value_bytes`` is the
result budget (as ``sqlgate`` builds it from ``max_result_bytes``), then run by ``SQLExecutor``
in a fresh process, which prints how much its peak resident size (``ru_maxrss``) grew during the
statement, how long the statement took and how it ended. ``--control`` also runs the same
statements with the value bound off (the budget on rows alone, as before): that holds the whole
value (1.5 GB for the first one) and is slow, so it is not run by default.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

STATEMENTS = {
    "repeat 500 MB": "SELECT repeat('x', 500000000) AS x",
    "string_agg 900 MB": "SELECT string_agg(repeat('x', 1000000), '') AS x "
    "FROM generate_series(1, 900)",
}

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import ReadOnlySettings, SafetyPolicy, SqlValidator, open_readonly_engine
url, sql, budget, timeout, bound = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
engine = open_readonly_engine(url, ReadOnlySettings(statement_timeout_s=timeout))
executor = SQLExecutor(engine, row_cap=1000, max_result_bytes=budget)
validator = SqlValidator("postgres", SafetyPolicy(max_value_bytes=budget if bound else None))
executor.run(validator.validate("SELECT 1 AS one"))
checked = validator.validate(sql)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
try:
    result = executor.run(checked)
    ended = f"{result.row_count} rows, cut by {result.cut_by}"
except ExecutionError as exc:
    ended = exc.code
elapsed = time.perf_counter() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_mb": (after - before) / 1024, "seconds": elapsed, "ended": ended}))
"""


def measure(url: str, sql: str, budget: int, timeout: int, bound: bool) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(ROOT),
            url,
            sql,
            str(budget),
            str(timeout),
            "1" if bound else "0",
        ],
        capture_output=True,
        text=True,
        timeout=timeout * 4 + 60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=64 * 1024 * 1024)
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--control", action="store_true", help="also run without the value bound")
    args = parser.parse_args()
    url = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
    if not url:
        sys.exit("SQLGATE_TEST_POSTGRES_URL is not set: this benchmark needs a PostgreSQL server")
    limit_mb = args.budget / 1024 / 1024 + 100
    print(
        f"budget {args.budget} bytes, statement timeout {args.timeout} s, "
        f"target: peak growth <= {limit_mb:.0f} MB and ended within the timeout\n"
    )
    print("| statement | value bound | peak RSS growth (MB) | seconds | ended |")
    print("|---|---|---|---|---|")
    for name, sql in STATEMENTS.items():
        for bound in (True, False) if args.control else (True,):
            got = measure(url, sql, args.budget, args.timeout, bound)
            print(
                f"| {name} | {'on' if bound else 'off'} | {got['grew_mb']:.1f} | "
                f"{got['seconds']:.1f} | {got['ended']} |"
            )


if __name__ == "__main__":
    main()
