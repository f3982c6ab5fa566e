"""One value larger than the budget is stopped by the database, not received by sqlgate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import Policy, ReadOnlySettings, SafetyPolicy, SqlValidator, open_readonly_engine

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
MYSQL = os.environ.get("SQLGATE_TEST_MYSQL_URL")


def test_the_policy_file_bounds_values_by_its_result_budget() -> None:
    policy = Policy.from_data({"max_result_bytes": 12345})
    assert policy.safety_policy().max_value_bytes == 12345


class TestRewrite:
    validator = SqlValidator("postgres", SafetyPolicy(max_value_bytes=1000))

    def test_the_approved_statement_validates_to_itself(self) -> None:
        for sql in (
            "SELECT 1 AS a",
            "SELECT a FROM t UNION SELECT b FROM u ORDER BY 1",
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
        ):
            bounded = self.validator.validate(sql).sql
            assert bounded is not None and "PG_COLUMN_SIZE(sqlgate_rows) > 1000" in bounded
            assert self.validator.validate(bounded).sql == bounded

    def test_another_wrapper_is_checked_like_any_sql(self) -> None:
        bounded = self.validator.validate("SELECT 1 AS a").sql or ""
        for forged in (
            bounded.replace("> 1000", "> 99999999"),  # a larger budget than the policy's
            bounded.replace("SELECT 1 AS a LIMIT 1001", "SELECT 1 AS a"),  # the LIMIT dropped
            bounded.replace("SELECT *", "SELECT sqlgate_rows"),
        ):
            result = SqlValidator(
                "postgres", SafetyPolicy(max_value_bytes=1000), schema={"t": ["a"]}
            ).validate(forged)
            assert result.sql != forged

    def test_other_engines_are_not_wrapped(self) -> None:
        for dialect in ("sqlite", "duckdb", "mysql"):
            sql = (
                SqlValidator(dialect, SafetyPolicy(max_value_bytes=10))
                .validate("SELECT 1 AS a")
                .sql
            )
            assert sql is not None and "sqlgate_rows" not in sql


@pytest.mark.skipif(not POSTGRES, reason="SQLGATE_TEST_POSTGRES_URL is not set")
class TestPostgres:
    def executor(self, budget: int) -> SQLExecutor:
        assert POSTGRES
        engine = open_readonly_engine(POSTGRES, ReadOnlySettings(statement_timeout_s=30))
        return SQLExecutor(engine, max_result_bytes=budget)

    def test_rows_within_the_budget_come_back_unchanged(self) -> None:
        validator = SqlValidator("postgres", SafetyPolicy(max_value_bytes=2000))
        executor = self.executor(2000)
        result = executor.run(
            validator.validate(
                "SELECT g, repeat('y', g) AS s FROM generate_series(1, 3) AS g ORDER BY g DESC"
            )
        )
        assert result.columns == ["g", "s"]
        assert result.rows == [[3, "yyy"], [2, "yy"], [1, "y"]]
        executor.engine.dispose()

    def test_a_row_past_the_budget_is_refused_by_the_server(self) -> None:
        validator = SqlValidator("postgres", SafetyPolicy(max_value_bytes=2000))
        executor = self.executor(2000)
        with pytest.raises(ExecutionError) as caught:
            executor.run(
                validator.validate("SELECT repeat('y', 1500) AS a, repeat('z', 1500) AS b")
            )
        assert caught.value.code == "value_over_budget"
        assert "2000 bytes" in caught.value.message
        executor.engine.dispose()

    def test_a_huge_value_never_reaches_the_process(self) -> None:
        """200 MB from one ``repeat``: the process grows by far less than the value and the
        statement ends within its timeout (the full 500 MB case: benchmarks/pg_large_value.py)."""
        budget = 3_000_000
        script = f"""
import json, resource, sys, time
sys.path.insert(0, {str(ROOT)!r})
from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import ReadOnlySettings, SafetyPolicy, SqlValidator, open_readonly_engine
engine = open_readonly_engine({POSTGRES!r}, ReadOnlySettings(statement_timeout_s=30))
executor = SQLExecutor(engine, max_result_bytes={budget})
validator = SqlValidator("postgres", SafetyPolicy(max_value_bytes={budget}))
executor.run(validator.validate("SELECT 1 AS one"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
try:
    executor.run(validator.validate("SELECT repeat('x', 200000000) AS x"))
    ended = "rows"
except ExecutionError as exc:
    ended = exc.code
print(json.dumps({{"grew_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
                  "seconds": time.perf_counter() - started, "ended": ended}}))
"""
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
        )
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        assert measured["ended"] == "value_over_budget", measured
        assert measured["grew_kb"] < (budget // 1024) + 100 * 1024, measured
        assert measured["seconds"] < 30, measured


@pytest.mark.skipif(not MYSQL, reason="SQLGATE_TEST_MYSQL_URL is not set")
def test_mysql_refuses_to_build_a_value_past_max_allowed_packet() -> None:
    """MariaDB/MySQL bound a value themselves (NULL past ``max_allowed_packet``)."""
    assert MYSQL
    engine = sa.create_engine(MYSQL)
    with engine.connect() as conn:
        packet = conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar()
        value = conn.exec_driver_sql("SELECT repeat('x', 500000000)").scalar()
    engine.dispose()
    assert int(packet) < 500_000_000 and value is None
