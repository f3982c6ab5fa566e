"""The asker's attributes bind the policy's row filters for the whole run: recorded with it, so a
run taken over or resumed by another process (another pipeline object) keeps the asker's filter,
its batch records them so that an edit by any reviewer is checked with the ASKER's attributes,
and a run asked without them is refused (``row_filter_unbound``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx2
import pytest

from approvals import ApprovalGate, SqlApprovalStore
from orchestrator.core.database import TargetDatabase, validator_without_database
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from ratelimit import SlidingWindowLimiter
from safety import Policy, SqlValidator

POLICY = Policy.from_toml_text('[rows]\n"orders" = "region = {user.region}"\n')
LIST_ORDERS = "SELECT order_id, region FROM orders ORDER BY order_id"
PURPOSE = "every order"


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, region TEXT, total REAL)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)",
            [(1, "EU", 10.0), (2, "US", 20.0), (3, "EU", 30.0), (4, "APAC", 40.0)],
        )
    return path


def pipeline(shop: Path, state: Path) -> Pipeline:
    """A new process's pipeline: its own database object and stores, a model that never answers."""
    url = f"sqlite:///{state}"
    llm = LLMClient(
        LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=5, window=60.0, mode="fail_fast"),
        http_client=httpx2.Client(transport=CassetteTransport([])),
    )
    return Pipeline(
        TargetDatabase(f"sqlite:///{shop}", policy=POLICY),
        llm,
        None,
        approval_store=SqlApprovalStore(url),
        run_store=RunStore(url),
    )


def approve(state: Path, run_id: str) -> None:
    approvals = SqlApprovalStore(f"sqlite:///{state}")
    [record] = approvals.pending_batches(run_id=run_id)
    ApprovalGate(
        reviewer=None, validate=SqlValidator(dialect="sqlite").validate, store=approvals
    ).submit(record.batch_id, {c: "approve" for c in record.batch.pending_ids}, actor="rita")


def test_a_queued_run_keeps_its_askers_filter_through_takeover_edit_and_resume(
    shop: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.sqlite"
    pipeline(shop, state).queue(
        "run_eu", [PURPOSE], statements=[LIST_ORDERS], identity={"region": "EU"}
    )
    pipeline(shop, state).queue(
        "run_us", [PURPOSE], statements=[LIST_ORDERS], identity={"region": "US"}
    )

    [eu_paused] = pipeline(shop, state).recover("run_eu")  # another process starts each
    [us_paused] = pipeline(shop, state).recover("run_us")
    assert eu_paused.status == us_paused.status == RunStatus.AWAITING_APPROVAL

    approvals = SqlApprovalStore(f"sqlite:///{state}")
    [eu_batch] = approvals.pending_batches(run_id="run_eu")
    [us_batch] = approvals.pending_batches(run_id="run_us")
    assert "region = 'EU'" in eu_batch.batch.pending[0].sql
    assert "region = 'US'" in us_batch.batch.pending[0].sql
    assert eu_batch.batch.context["identity"] == {"region": "EU"}

    # A reviewer's edit, checked in yet another process, is bound to the ASKER's attributes.
    reviewer_side = TargetDatabase(f"sqlite:///{shop}", policy=POLICY)
    edited = reviewer_side.validator_for(eu_batch.batch.context).validate("SELECT * FROM orders")
    assert edited.ok and "region = 'EU'" in edited.sql and "'US'" not in edited.sql
    offline = validator_without_database(eu_batch.batch.context, POLICY)  # no schema at hand
    assert offline.validate(LIST_ORDERS).refusal.code == "schema_unknown"  # fails closed

    approve(state, "run_eu")
    approve(state, "run_us")
    [eu] = pipeline(shop, state).resume("run_eu")  # resumed by another pipeline object
    [us] = pipeline(shop, state).resume("run_us")

    assert eu.status == us.status == RunStatus.ANSWERED
    assert eu.rows_preview == [[1, "EU"], [3, "EU"]]
    assert us.rows_preview == [[2, "US"]]


def test_a_run_started_in_process_records_its_attributes_for_the_resume(
    shop: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state.sqlite"
    [paused] = pipeline(shop, state).run_batch(
        [PURPOSE], statements=["SELECT order_id FROM orders AS o"], identity={"region": "APAC"}
    )
    approve(state, paused.run_id)

    [answered] = pipeline(shop, state).resume(paused.run_id)

    assert answered.status == RunStatus.ANSWERED
    assert answered.rows_preview == [[4]]


def test_an_asker_without_the_attribute_is_refused(shop: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite"
    for identity in (None, {"team": "sales"}):
        [refused] = pipeline(shop, state).run_batch(
            [PURPOSE], statements=[LIST_ORDERS], identity=identity
        )
        assert refused.status != RunStatus.ANSWERED and refused.rows_preview == []
        assert refused.error is not None and "region" in refused.error.message
        assert "row_filter_unbound" in refused.model_dump_json()


def test_validators_are_cached_per_policy_and_attributes(shop: Path) -> None:
    db = TargetDatabase(f"sqlite:///{shop}", policy=POLICY)
    eu = db.validator(POLICY, {"region": "EU"})
    assert db.validator(POLICY, {"region": "EU"}) is eu
    us = db.validator(POLICY, {"region": "US"})
    assert us is not eu
    assert "'US'" in us.validate(LIST_ORDERS).sql and "'EU'" in eu.validate(LIST_ORDERS).sql
    assert db.validator(POLICY).validate(LIST_ORDERS).refusal.code == "row_filter_unbound"


def test_a_distributed_batch_run_is_claimed_with_the_attributes_it_was_recorded_with(
    shop: Path, tmp_path: Path
) -> None:
    from orchestrator.core.state_db import StateDatabase

    state = tmp_path / "state.sqlite"
    db = TargetDatabase(f"sqlite:///{shop}", policy=POLICY)
    store = StateDatabase(f"sqlite:///{state}")
    store.setup()  # the runs table a batch records its runs in
    recorded = store.batches.record(
        "batch_rows",
        db.safe_url,
        [[PURPOSE]],
        options={},
        login=db.login_for(),
        identity={"region": "US", "team": "sales"},
    )
    [run] = recorded.runs

    # a worker claims the queued run as ``sqlgate worker`` does: nothing but its id and questions
    [paused] = pipeline(shop, state).run_batch(
        run.questions, run_id=run.run_id, statements=[LIST_ORDERS]
    )
    assert paused.status == RunStatus.AWAITING_APPROVAL
    [record] = SqlApprovalStore(f"sqlite:///{state}").pending_batches(run_id=run.run_id)
    assert record.batch.context["identity"] == {"region": "US"}  # what the filters name only
    approve(state, run.run_id)

    [answered] = pipeline(shop, state).resume(run.run_id)

    assert answered.rows_preview == [[2, "US"]]
