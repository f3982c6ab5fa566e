"""Risk of the final SQL decides: a reviewer's edit is assessed again, and an edit that raises the
risk to a level needing two reviewers re-opens the batch. Nothing runs, and nothing sensitive
reaches the asker, until the second reviewer approves the edited text.

The scenario as a user runs it: a run asks for a count of customers and pauses at the gate;
alice edits it into e-mail addresses with ``sqlgate approvals decide --file``; ``sqlgate resume``
finds it still waiting; bob approves the edited text; then it runs. On SQLite and PostgreSQL
state.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from typer.testing import CliRunner

from approvals import SqlApprovalStore
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from orchestrator.interfaces.cli.main import app
from orchestrator.wiring import run_hooks
from ratelimit import SlidingWindowLimiter
from safety import Policy
from tests.conftest import as_reviewer

runner = CliRunner()

POLICY = """
[risk]
sensitive_columns = ["customers.email", "customers.phone"]
sensitive = "high"
auto_approve = ["low"]

[risk.quorum]
high = 2
"""
COUNT = "SELECT count(*) AS n FROM customers"
EMAILS = "SELECT customer_id, email FROM customers ORDER BY customer_id LIMIT 5"


def _run(*args: str, code: int = 0) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture(params=["sqlite", "postgres"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    return request.getfixturevalue("postgres_database")


def _paused_run(demo_db: Path, state_url: str, policy_file: Path) -> str:
    """A run of the analyst's own SQL (no model call), paused at the gate."""
    llm = LLMClient(
        LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        limiter=SlidingWindowLimiter(limit=5, window=60.0, mode="fail_fast"),
        http_client=httpx2.Client(transport=CassetteTransport([])),
    )
    pipeline = Pipeline(
        TargetDatabase(f"sqlite:///{demo_db}", policy=Policy.from_toml_text(POLICY)),
        llm,
        None,
        approval_store=SqlApprovalStore(state_url),
        run_store=RunStore(state_url),
        hooks=run_hooks(),
    )
    [paused] = pipeline.run_batch(["how many customers are there?"], statements=[COUNT])
    assert paused.status == RunStatus.AWAITING_APPROVAL
    return paused.run_id


@pytest.mark.vcr  # no interaction recorded: a model request would fail the test
def test_an_edit_that_raises_risk_waits_for_the_second_reviewer(
    demo_db: Path, tmp_path: Path, state_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY)
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    monkeypatch.setenv("SQLGATE_POLICY", str(policy_file))
    # the analyst's own SQL needs no model: a dead endpoint proves no call is made
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    db = f"sqlite:///{demo_db}"
    run_id = _paused_run(demo_db, state_url, policy_file)

    [listed] = _run("approvals", "list", "--json")
    batch_id = listed["batch_id"]
    shown = _run("approvals", "show", batch_id, "--json")
    [item] = shown["batch"]["items"]
    assert item["risk"]["level"] != "high" and shown["batch"]["quorum"] == 1

    as_reviewer(monkeypatch, "alice")
    edit = tmp_path / "edit.json"
    edit.write_text(json.dumps({item["call_id"]: {"action": "edit", "sql": EMAILS}}))
    decided = _run("approvals", "decide", batch_id, "--file", str(edit), "--db", db, "--json")
    assert decided["status"] == "pending"
    assert (decided["votes"], decided["quorum"]) == (1, 2)
    assert "1 more reviewer" in decided["next"]

    # the batch now shows the edited statement, with its own risk, waiting for one more vote
    shown = _run("approvals", "show", batch_id, "--json")
    [edited] = shown["batch"]["items"]
    assert edited["sql"].startswith("SELECT customer_id, email FROM customers")
    assert edited["risk"]["level"] == "high"
    assert edited["risk"]["sensitive_columns"] == ["customers.email"]
    assert edited["edited_by"] == "alice" and edited["edited_from"] == item["sql"]
    assert shown["batch"]["quorum"] == 2 and shown["status"] == "pending"
    [listed] = _run("approvals", "list", "--json")
    assert listed["risk"] == "high"

    # the asker gets nothing yet: the run still waits, and no row was read
    waiting = _run("resume", run_id, "--db", db, "--json", code=11)
    assert waiting["status"] == "awaiting_approval"
    assert "@" not in json.dumps(waiting)
    store = SqlApprovalStore(state_url)
    assert store.executions(run_id=run_id) == []

    # alice cannot vote twice; bob approves the text alice wrote, and only then it runs
    again = tmp_path / "again.json"
    again.write_text(json.dumps({item["call_id"]: "approve"}))
    _run("approvals", "decide", batch_id, "--file", str(again), "--json", code=1)
    as_reviewer(monkeypatch, "bob")
    done = _run("approvals", "decide", batch_id, "--file", str(again), "--db", db, "--json")
    assert done["status"] == "resolved"
    resolution = done["resolutions"][item["call_id"]]
    assert resolution["status"] == "edited" and resolution["risk"]["level"] == "high"
    assert resolution["edited_from"] == item["sql"]
    answered = _run("resume", run_id, "--db", db, "--json")
    assert answered["status"] == "answered" and answered["row_count"] == 5

    events = _run("approvals", "history", "--run", run_id, "--json")
    [reopened] = [e for e in events if e["event"] == "batch_reopened"]
    assert reopened["actor"] == "alice"
    assert reopened["detail"]["quorum"] == 2
    assert reopened["detail"]["edited"][item["call_id"]]["risk"]["level"] == "high"
    [resolved] = [e for e in events if e["event"] == "item_resolved"]
    assert resolved["detail"]["risk"]["level"] == "high"
    store.close()


def test_an_edit_that_keeps_the_risk_decides_on_one_vote(
    demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY)
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    db = f"sqlite:///{demo_db}"
    _paused_run(demo_db, state_url, policy_file)
    [listed] = _run("approvals", "list", "--json")
    [item] = _run("approvals", "show", listed["batch_id"], "--json")["batch"]["items"]

    as_reviewer(monkeypatch, "alice")
    edit = tmp_path / "edit.json"
    edit.write_text(
        json.dumps({item["call_id"]: {"action": "edit", "sql": "SELECT count(*) FROM regions"}})
    )
    done = _run(
        "approvals", "decide", listed["batch_id"], "--file", str(edit), "--db", db, "--json"
    )
    assert done["status"] == "resolved"
    resolution = done["resolutions"][item["call_id"]]
    assert resolution["status"] == "edited" and resolution["risk"]["level"] != "high"


def test_an_edit_decided_without_the_database_fails_closed(
    demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``--db`` the edit cannot be planned or resolved against the schema: under
    sensitive columns, unresolved columns count as sensitive, so the batch waits."""
    state_url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY)
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    _paused_run(demo_db, state_url, policy_file)
    [listed] = _run("approvals", "list", "--json")
    [item] = _run("approvals", "show", listed["batch_id"], "--json")["batch"]["items"]

    as_reviewer(monkeypatch, "alice")
    edit = tmp_path / "edit.json"
    edit.write_text(
        json.dumps(
            {item["call_id"]: {"action": "edit", "sql": "SELECT c.email FROM customers AS c"}}
        )
    )
    decided = _run("approvals", "decide", listed["batch_id"], "--file", str(edit), "--json")
    assert decided["status"] == "pending" and decided["quorum"] == 2
