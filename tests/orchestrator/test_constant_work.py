"""Work that does not change within a run is done once: each statement validated once, one
validator per policy and schema read, one memory scope (and its sqlglot schema) per database and
policy, each response model's JSON schema built once, and batch results made durable once per
stage rather than once per record."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agents import ReasoningBatch
from agents.llm_agent import compact_schema, json_schema
from approvals import ApproveAll
from orchestrator.core.batch_io import ResultWriter
from orchestrator.core.database import TargetDatabase
from orchestrator.core.pipeline import PipelineConfig
from orchestrator.core.result import RunResult, RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.features.memory.fingerprint import columns_read, resolver_schema
from orchestrator.features.memory.hooks import scope_for
from safety import Policy, SqlValidator
from tests.orchestrator.conftest import Harness
from tests.scripted_llm import scenarios as sc


@pytest.mark.vcr
def test_each_statement_is_validated_once(
    harness: Harness, demo_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = SqlValidator.validate

    def counted(self: SqlValidator, sql: str) -> Any:
        seen.append(sql)
        return real(self, sql)

    monkeypatch.setattr(SqlValidator, "validate", counted)
    questions = [sc.TOP_CATEGORIES, sc.DELETE_CANCELLED, sc.PRODUCT_COUNT]
    results = harness.pipeline(demo_url, ApproveAll()).run_batch(questions)

    assert [r.status for r in results] == [
        RunStatus.ANSWERED,
        RunStatus.UNSAFE,
        RunStatus.ANSWERED,
    ]
    checked = [t for r in results for t in r.trace if t.agent == "SafetyValidator"]
    assert len(checked) == 3
    assert len(seen) == len(checked)  # the gate did not validate them again


def test_one_validator_per_policy_and_schema_read(demo_url: str) -> None:
    database = TargetDatabase(demo_url)
    narrow = Policy.from_data({"tables": {"deny": ["employees"]}})
    try:
        base = database.validator()
        assert database.validator() is base
        assert database.validator(Policy()) is base  # an equal policy: the same validator
        assert database.validator(narrow) is database.validator(narrow)
        assert database.validator(narrow) is not base
        assert not database.validator(narrow).validate("SELECT name FROM employees").ok
        database.resolved_schema(refresh=True)
        assert database.validator() is not base  # a new schema read: built again
    finally:
        database.dispose()


def test_one_memory_scope_per_database_and_policy(demo_url: str) -> None:
    database = TargetDatabase(demo_url)
    try:
        policy = database.policy.safety_policy()
        scope = scope_for(database, policy)
        assert scope_for(database, policy) is scope
        assert scope.resolver is scope.resolver  # sqlglot's schema built once per scope
        other = Policy.from_data({"tables": {"deny": ["employees"]}}).safety_policy()
        assert scope_for(database, other) is not scope
        assert scope_for(database, other).schema_fp == scope.schema_fp
    finally:
        database.dispose()


def test_a_prebuilt_resolver_reads_the_same_columns_as_the_mapping() -> None:
    schema = {"Orders": ["order_id", "Customer_ID"], "customers": ["customer_id", "segment"]}
    sql = (
        "SELECT c.segment, COUNT(o.order_id) FROM orders AS o JOIN customers AS c "
        "ON o.customer_id = c.customer_id GROUP BY c.segment"
    )
    resolver = resolver_schema(schema, "sqlite")
    assert columns_read(sql, "sqlite", resolver) == columns_read(sql, "sqlite", schema)
    assert columns_read(sql, "sqlite", resolver)[1] == frozenset(
        {"orders.order_id", "orders.customer_id", "customers.customer_id", "customers.segment"}
    )
    unknown = "SELECT nope FROM orders"
    assert columns_read(unknown, "sqlite", resolver) == columns_read(unknown, "sqlite", schema)


def test_each_response_model_schema_is_built_once() -> None:
    assert json_schema(ReasoningBatch) is json_schema(ReasoningBatch)
    assert json_schema(ReasoningBatch) == ReasoningBatch.model_json_schema()
    assert json.loads(compact_schema(ReasoningBatch)) == ReasoningBatch.model_json_schema()


def _result(question: str) -> RunResult:
    return RunResult(run_id="run_1", question=question, status=RunStatus.ANSWERED)


def test_results_are_synced_once_per_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    out = tmp_path / "results.jsonl"
    with ResultWriter(out) as writer:
        for n in range(5):
            writer.write(_result(f"q{n}"))
        assert synced == []  # written (flushed to the OS), not yet made durable
        assert len(out.read_text().splitlines()) == 5
        writer.sync()
        writer.sync()  # nothing new: no second fsync
        assert len(synced) == 1
        writer.write(_result("q5"))
    assert len(synced) == 2  # closing makes the last record durable


def test_a_stage_s_results_are_flushed_together() -> None:
    """``RunContext.emit`` hands out every finished question, then tells a sink with ``flush``
    once: the batch command's one ``fsync`` per stage."""
    events: list[str] = []

    class Sink:
        def __call__(self, index: int, result: RunResult) -> None:
            events.append(f"result {index}")

        def flush(self) -> None:
            events.append("flush")

    ctx = RunContext(run_id="run_1", questions=[], dialect="sqlite", preview_rows=5)
    ctx.on_result = Sink()
    ctx.emit()
    assert events == []  # nothing finished: no flush

    from orchestrator.core.question import QuestionState

    qs = [QuestionState("run_1", f"q{i}", f"question {i}", clock=lambda: 0.0) for i in range(3)]
    ctx.questions = qs
    qs[0].finish(RunStatus.ANSWERED)
    qs[2].finish(RunStatus.UNSAFE)
    ctx.emit()
    assert events == ["result 0", "result 2", "flush"]
    ctx.emit()
    assert events == ["result 0", "result 2", "flush"]  # nothing new
    qs[1].finish(RunStatus.ANSWERED)
    ctx.emit(flush=False, only=qs[1])  # the one a stage just finished, not yet durable
    assert events[3:] == ["result 1"]
    ctx.emit()
    assert events[3:] == ["result 1", "flush"]


@pytest.mark.vcr
def test_a_batch_flushes_once_per_stage_not_per_result(harness: Harness, demo_url: str) -> None:
    """Four answers written over two batched answer calls: four results, one flush."""
    events: list[str] = []

    class Sink:
        def __call__(self, index: int, result: RunResult) -> None:
            events.append(f"result {result.status.value}")

        def flush(self) -> None:
            events.append("flush")

    pipeline = harness.pipeline(demo_url, ApproveAll(), config=PipelineConfig(k=2))
    pipeline.run_batch(sc.COUNT_QUESTIONS[:4], on_result=Sink())
    assert events == ["result answered"] * 4 + ["flush"]
