"""What the sandbox costs a query, and what it stops: execution in worker processes vs in-process.

Run: .venv/bin/python benchmarks/execution_overhead.py [--repeat N]

For SQLite (the demo database) and DuckDB (the same tables copied), the same statements run
through ``SQLExecutor`` on two read-only engines of the same file: ``sandbox_workers=0`` (the
statement runs in this process) and the default sandbox (a warm worker process per statement,
rows pickled back over a socket). Runs are interleaved so machine load hits both alike; figures
are medians and 95th percentiles in milliseconds over ``--repeat`` runs (default 200).

Then the denial-of-service statements of issue 10, each through the sandbox with a 1 s
statement timeout while a second thread runs ``SELECT 1`` through the same executor: the time
each took, how it ended, the workers' peak resident memory (sampled every ~10 ms from /proc)
and the slowest ``SELECT 1`` meanwhile. Also: a worker's start-up time and idle memory.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agents.errors import ExecutionError  # noqa: E402
from agents.sql_executor import SQLExecutor  # noqa: E402
from orchestrator.demo_db import build_demo_database  # noqa: E402
from safety import QuerySandbox, ReadOnlySettings, open_readonly_engine  # noqa: E402
from safety.statement import _minted as unchecked  # noqa: E402  (raw statements: execution cost only)

QUERIES = {
    "SELECT 1": "SELECT 1",
    "count(*) of 4,000 orders": "SELECT COUNT(*) FROM orders",
    "group by, 5 rows": "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY n DESC",
    "1,000 rows x 4 columns": "SELECT order_id, customer_id, order_date, status FROM orders "
    "ORDER BY order_id LIMIT 1000",
}
ATTACKS = {
    "sqlite": {
        "backtracking REGEXP": "SELECT ('a' || printf('%.*c', 200000, 'a') || 'b') REGEXP '(a+)+$'",
        "printf width 2e9": "SELECT printf('%.*c', 2000000000, 'x')",
        "endless recursion": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
        "SELECT max(i) FROM r",
    },
    "duckdb": {
        "backtracking regexp": "SELECT regexp_matches(repeat('a', 200000) || 'b', '(a+)+$')",
        "repeat 2e9": "SELECT length(repeat('x', 2000000000))",
        "list of 3e8": "SELECT list_sum(range(300000000))",
        "cross join 1e8 x 1e8": "SELECT sum(x.range * y.range) FROM range(100000000) AS x, "
        "range(100000000) AS y",
    },
}


def _duckdb_copy(sqlite_path: Path, folder: Path) -> Path:
    import duckdb
    import sqlalchemy as sa

    path = folder / "demo.duckdb"
    conn = duckdb.connect(str(path))
    source = sa.create_engine(f"sqlite:///{sqlite_path}")
    with source.connect() as src:
        rows = src.exec_driver_sql(
            "SELECT order_id, customer_id, order_date, status FROM orders"
        ).fetchall()
    conn.execute(
        "CREATE TABLE orders (order_id INTEGER, customer_id INTEGER, order_date DATE, status TEXT)"
    )
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?, ?)", [tuple(r) for r in rows])
    conn.close()
    return path


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return f"{statistics.median(values) * 1000:7.2f} / {p95 * 1000:7.2f}"


def overhead(urls: dict[str, str], repeat: int) -> None:
    print("## Execution time, in-process vs sandbox (median / p95 ms)\n")
    print("| engine | statement | in-process | sandbox | added (median) |")
    print("|---|---|---|---|---|")
    for dialect, url in urls.items():
        here = open_readonly_engine(url, ReadOnlySettings(sandbox_workers=0))
        boxed = open_readonly_engine(url, ReadOnlySettings())
        direct, sandboxed = SQLExecutor(here), SQLExecutor(boxed)
        assert direct.sandbox is None and sandboxed.sandbox is not None
        for name, sql in QUERIES.items():
            times: dict[str, list[float]] = {"here": [], "box": []}
            for i in range(repeat + 5):
                for key, executor in (("here", direct), ("box", sandboxed)):
                    started = time.perf_counter()
                    executor.run(unchecked(sql, dialect, None))
                    if i >= 5:  # warm-up (and the sandbox's first start) left out
                        times[key].append(time.perf_counter() - started)
            added = statistics.median(times["box"]) - statistics.median(times["here"])
            print(
                f"| {dialect} | {name} | {_ms(times['here'])} | {_ms(times['box'])} | "
                f"{added * 1000:+.2f} ms |"
            )
        sandboxed.sandbox.close()
        here.dispose()
        boxed.dispose()


def _rss(pid: int, field: str = "VmHWM:") -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def startup(urls: dict[str, str]) -> None:
    print("\n## Worker start-up and idle memory\n")
    print("| engine | start to ready | idle RSS per worker |")
    print("|---|---|---|")
    for dialect, url in urls.items():
        started = time.perf_counter()
        with QuerySandbox(url, ReadOnlySettings(sandbox_workers=1)) as box:
            box.run("SELECT 1", row_cap=1)
            ready = time.perf_counter() - started
            rss = max(_rss(pid, "VmRSS:") for pid in box.pids)
        print(f"| {dialect} | {ready * 1000:.0f} ms | {rss / 2**20:.0f} MiB |")


def _ping(
    executor: SQLExecutor,
    box: QuerySandbox,
    stop: threading.Event,
    worst: list[float],
    peak: list[int],
) -> None:
    """A second request of this process, run until ``stop``; the workers' memory sampled."""
    while not stop.is_set():
        started = time.perf_counter()
        executor.run(unchecked("SELECT 1", executor.dialect, None))
        worst[0] = max(worst[0], time.perf_counter() - started)
        for pid in box.pids:
            peak[0] = max(peak[0], _rss(pid))
        time.sleep(0.01)


def attacks(urls: dict[str, str]) -> None:
    print("\n## Denial-of-service statements, 1 s statement timeout, sandbox\n")
    print("| engine | statement | ended after | outcome | worker peak RSS | slowest SELECT 1 |")
    print("|---|---|---|---|---|---|")
    settings = ReadOnlySettings(statement_timeout_s=1.0)
    for dialect, url in urls.items():
        engine = open_readonly_engine(url, settings)
        executor = SQLExecutor(engine)
        box = executor.sandbox
        assert box is not None
        for name, sql in ATTACKS[dialect].items():
            while box.ready_count < box.size:
                time.sleep(0.05)
            stop = threading.Event()
            worst = [0.0]
            peak = [0]
            pinger = threading.Thread(
                target=_ping, args=(executor, box, stop, worst, peak), daemon=True
            )
            pinger.start()
            time.sleep(0.1)
            started = time.perf_counter()
            try:
                executor.run(unchecked(sql, dialect, None))
                outcome = "rows"
            except ExecutionError as exc:
                outcome = exc.code
            elapsed = time.perf_counter() - started
            time.sleep(0.05)
            stop.set()
            pinger.join()
            print(
                f"| {dialect} | {name} | {elapsed:.2f} s | {outcome} | "
                f"{peak[0] / 2**20:.0f} MiB | {worst[0] * 1000:.1f} ms |"
            )
        box.close()
        engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sqlgate-exec-"))
    sqlite_path = build_demo_database(folder / "demo.sqlite")
    urls = {
        "sqlite": f"sqlite:///{sqlite_path}",
        "duckdb": f"duckdb:///{_duckdb_copy(sqlite_path, folder)}",
    }
    overhead(urls, args.repeat)
    startup(urls)
    attacks(urls)


if __name__ == "__main__":
    main()
