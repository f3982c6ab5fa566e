"""A database error that quotes a value reaches no one under a policy that protects columns:
not the correction prompt sent to the model, not the trace, not the run's result.

The scripted model's first statement makes SQLite fail with ``JSON path error near '<a
customer's last name>'``; the policy denies ``customers.email``, so the executor reduces the
error to its class before the pipeline sees it. The recorded correction request is read back
from the cassette.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from approvals import ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.result import RunStatus
from safety import Policy
from tests.scripted_llm import scenarios as sc

CORRECTION_MARKER = "SQL queries written for data analysts failed"


class TestErrorTextUnderColumnRules:
    @pytest.mark.vcr
    def test_the_value_reaches_neither_prompt_nor_trace_nor_result(
        self, harness, demo_db: Path, vcr
    ) -> None:
        with sqlite3.connect(demo_db) as conn:
            names = {r[0] for r in conn.execute("SELECT last_name FROM customers")}
        policy = Policy.from_data({"columns": {"deny": ["customers.email"]}})
        database = TargetDatabase(f"sqlite:///{demo_db}", policy=policy)
        pipeline = Pipeline(database, harness.llm(), ApproveAll())
        try:
            result = pipeline.ask(sc.VALUE_IN_ERROR)
        finally:
            database.dispose()

        assert result.status == RunStatus.ANSWERED, result.error
        assert result.corrections == 1
        corrections = [
            r.body.decode() if isinstance(r.body, bytes) else str(r.body)
            for r in vcr.requests
            if CORRECTION_MARKER in (r.body.decode() if isinstance(r.body, bytes) else str(r.body))
        ]
        assert len(corrections) == 1
        assert "JSON path error near" in corrections[0]
        assert "details withheld" in corrections[0]
        shown = result.model_dump_json()
        for name in names:
            assert f"near '{name}'" not in corrections[0] and f"near '{name}'" not in shown
            assert f"near \\u0027{name}" not in corrections[0]
        failed = [t for t in result.trace if t.agent == "SQLExecutor" and not t.ok]
        assert failed and all("details withheld" in t.output_summary for t in failed)
