"""A byte budget on results: 300 rows of a megabyte each never become 300 MB in sqlgate.

Every engine (SQLite and DuckDB in-process and in their sandbox workers, PostgreSQL and MariaDB
through server-side cursors) is asked for ``300 x 1,000,000`` bytes under a small budget: the
result is cut like at the row cap (``truncated``, ``cut_by="bytes"``, a ``byte_cap_hit``
warning), and the memory sqlgate allocated stays near the budget (Python's allocations by
``tracemalloc``; on PostgreSQL, the resident size of a separate process as well, since libpq's
buffers are not Python's).
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents import ResultValidator
from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import ReadOnlySettings, open_readonly_engine
from safety.result_budget import fetch_bounded, row_bytes
from safety.statement import (
    _minted as unchecked,  # the database's own walls, tested apart from the validator
)

ROOT = Path(__file__).resolve().parents[2]
ROWS, SIZE = 300, 1_000_000
BUDGET = 3 * SIZE  # a few rows' worth
BIG = {
    "sqlite": (
        f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS}) "
        f"SELECT printf('%.*c', {SIZE}, 'x') AS v FROM n"
    ),
    "duckdb": f"SELECT repeat('x', {SIZE}) AS v FROM range({ROWS})",
    "postgres": f"SELECT repeat('x', {SIZE}) AS v FROM generate_series(1, {ROWS})",
    "mysql": f"SELECT REPEAT('x', {SIZE}) AS v FROM seq_1_to_{ROWS}",
}
ENGINES = ("sqlite", "sqlite-sandbox", "duckdb", "duckdb-sandbox", "postgres", "mysql")


def _engine(kind: str, tmp: Path) -> sa.Engine:
    dialect = kind.split("-")[0]
    workers = 1 if kind.endswith("sandbox") else 0
    settings = ReadOnlySettings(
        statement_timeout_s=20, sandbox_workers=workers, max_value_bytes=4 * SIZE
    )
    if dialect == "sqlite":
        path = tmp / "x.db"
        sqlite3.connect(path).execute("CREATE TABLE t (a INTEGER)").connection.commit()
        return open_readonly_engine(f"sqlite:///{path}", settings)
    if dialect == "duckdb":
        import duckdb

        path = tmp / "x.duckdb"
        duckdb.connect(str(path)).execute("CREATE TABLE t (a INTEGER)").close()
        return open_readonly_engine(f"duckdb:///{path}", settings)
    env = "SQLGATE_TEST_POSTGRES_URL" if dialect == "postgres" else "SQLGATE_TEST_MYSQL_URL"
    url = os.environ.get(env)
    if not url:
        pytest.skip(f"{env} is not set; the {dialect} byte-budget test needs a server")
    return open_readonly_engine(url, settings)


@pytest.mark.parametrize("kind", ENGINES)
class TestByteBudget:
    def test_a_big_result_is_cut_at_the_budget_and_says_so(self, kind, tmp_path):
        engine = _engine(kind, tmp_path)
        executor = SQLExecutor(engine, row_cap=1000, max_result_bytes=BUDGET)
        tracemalloc.start()
        try:
            result = executor.run(unchecked(BIG[kind.split("-")[0]], executor.dialect, None))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            engine.dispose()
        assert result.truncated and result.cut_by == "bytes"
        assert 1 <= result.row_count <= BUDGET // SIZE
        assert result.byte_cap == BUDGET
        assert "byte_cap_hit" in ResultValidator().check(result)[0]
        # The rows kept, the one that went past, and the JSON-safe copy: a few budgets, not 300 MB.
        assert peak < 4 * BUDGET + 8 * SIZE, peak

    def test_a_result_within_the_budget_is_whole(self, kind, tmp_path):
        engine = _engine(kind, tmp_path)
        executor = SQLExecutor(engine, row_cap=1000, max_result_bytes=BUDGET)
        small = BIG[kind.split("-")[0]].replace(str(SIZE), "10")
        try:
            result = executor.run(unchecked(small, executor.dialect, None))
        finally:
            engine.dispose()
        assert not result.truncated and result.cut_by is None and result.row_count == ROWS

    def test_the_row_cap_still_cuts_first_when_it_is_smaller(self, kind, tmp_path):
        engine = _engine(kind, tmp_path)
        executor = SQLExecutor(engine, row_cap=2, max_result_bytes=BUDGET)
        try:
            result = executor.run(unchecked(BIG[kind.split("-")[0]], executor.dialect, None))
        finally:
            engine.dispose()
        assert result.truncated and result.cut_by == "rows" and result.row_count == 2


_RSS_SCRIPT = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import ReadOnlySettings, open_readonly_engine
from safety.statement import _minted as unchecked
engine = open_readonly_engine(sys.argv[2], ReadOnlySettings(statement_timeout_s=30))
executor = SQLExecutor(engine, row_cap=1000, max_result_bytes=int(sys.argv[4]))
executor.run(unchecked("SELECT 1", "postgres", None))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = executor.run(unchecked(sys.argv[3], "postgres", None))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_kb": after - before, "rows": result.row_count, "cut": result.cut_by}))
"""


class TestPostgresResidentMemory:
    """The peak resident size of a process running the statement grows by about the budget."""

    def test_resident_memory_growth_is_bounded(self):
        url = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
        if not url:
            pytest.skip("SQLGATE_TEST_POSTGRES_URL is not set")
        done = subprocess.run(
            [sys.executable, "-c", _RSS_SCRIPT, str(ROOT), url, BIG["postgres"], str(BUDGET)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        assert measured["cut"] == "bytes" and measured["rows"] <= BUDGET // SIZE
        # 300 MB if every row were held; the budget (3 MB) plus a row or two and driver buffers.
        assert measured["grew_kb"] < 40 * 1024, measured


class TestFetchBounded:
    """The fetch loop alone, over a fake cursor that records what it was asked for."""

    @pytest.mark.parametrize("row_size", [1, 100, 10_000])
    def test_batches_follow_the_budget_left(self, row_size):
        asked: list[int] = []
        rows = [("x" * row_size,)] * 5000

        def fetchmany(n: int) -> list:
            asked.append(n)
            start = sum(asked) - n
            return rows[start : start + n]

        budget = 200_000
        fetched = fetch_bounded(fetchmany, 5000, budget)
        per_row = row_bytes(rows[0])
        assert fetched.size <= budget and len(fetched.rows) == min(5000, budget // per_row)
        # Never more rows in hand than the budget holds plus one batch of at most half of it.
        assert max(asked) * per_row <= budget // 2 + per_row
        assert fetched.cut_by == ("bytes" if 5000 * per_row > budget else None)

    def test_the_extra_row_tells_a_row_cut(self):
        rows = iter([(i,) for i in range(10)])
        fetched = fetch_bounded(lambda n: list(itertools.islice(rows, n)), 3, 10**9)
        assert [r[0] for r in fetched.rows] == [0, 1, 2] and fetched.cut_by == "rows"


@pytest.mark.parametrize("kind", ["postgres", "mysql"])
class TestStreamingKeepsTheWalls:
    """Rows read through a server-side cursor: several statements in one text are still refused
    by the server, and the transaction is still read-only."""

    def test_several_statements_are_refused(self, kind, tmp_path):
        engine = _engine(kind, tmp_path)
        executor = SQLExecutor(engine, max_result_bytes=BUDGET)
        try:
            for sql in ("SELECT 1; SELECT 2", "SELECT 1; CREATE TABLE sg_budget_wall (a INT)"):
                with pytest.raises(ExecutionError):
                    executor.run(unchecked(sql, executor.dialect, None))
            with pytest.raises(ExecutionError):
                executor.run(
                    unchecked("CREATE TABLE sg_budget_wall (a INT)", executor.dialect, None)
                )
            assert executor.run(unchecked("SELECT 1 AS a", executor.dialect, None)).rows == [[1]]
        finally:
            engine.dispose()
