"""The reviewer's command line: ask --defer, approvals list/show/decide/history, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.interfaces.cli.main import app
from tests.conftest import as_reviewer
from tests.scripted_llm import scenarios as sc

runner = CliRunner()


def _run(*args: str, code: int = 0) -> object:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if "--json" in args else result.output


@pytest.mark.vcr
def test_defer_decide_resume(
    monkeypatch: pytest.MonkeyPatch, demo_db: Path, tmp_path: Path, model_endpoint, vcr
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    as_reviewer(monkeypatch, "alice")
    db = f"sqlite:///{demo_db}"

    paused = _run("ask", sc.PRODUCT_COUNT, "--db", db, "--defer", "--json", code=11)
    assert paused["status"] == "awaiting_approval"

    [batch] = _run("approvals", "list", "--json")
    assert (batch["run_id"], batch["pending"]) == (paused["run_id"], 1)
    shown = _run("approvals", "show", batch["batch_id"], "--json")
    [item] = shown["batch"]["items"]
    assert "COUNT(p.product_id)" in item["sql"]
    # the risk was taken before review, from SQLite's query plan, and travels with the item
    risk = item["risk"]
    assert risk["engine"] == "sqlite" and risk["estimate"] and risk["estimate_error"] is None
    assert "products" in risk["tables"] and batch["risk"] == risk["level"]
    text = _run("approvals", "show", batch["batch_id"])
    assert f"risk: {risk['level']}" in text and "estimate (sqlite)" in text

    decisions = tmp_path / "decisions.json"
    decisions.write_text(json.dumps({item["call_id"]: "approve"}))
    as_reviewer(monkeypatch, "rita")  # another reviewer than the asker decides
    decided = _run("approvals", "decide", batch["batch_id"], "--file", str(decisions), "--json")
    assert decided["resolutions"][item["call_id"]]["status"] == "approved"

    other = tmp_path / "other.json"
    other.write_text(
        json.dumps({item["call_id"]: {"action": "reject", "reason": "changed my mind"}})
    )
    conflict = _run(
        "approvals", "decide", batch["batch_id"], "--file", str(other), "--json", code=1
    )
    assert conflict["status"] == "error"

    assert _run("approvals", "list", "--json") == []
    done = _run("resume", paused["run_id"], "--json")
    assert done["status"] == "answered" and done["row_count"] == 8

    events = _run("approvals", "history", "--run", paused["run_id"], "--json")
    assert any(e["actor"] == "rita" for e in events)
    kinds = [e["event"] for e in events]
    assert kinds.count("execution_claimed") == kinds.count("execution_sent") == 1

    # what resume ran, memory kept: the reviewer's approved SQL, for the next similar question
    [example] = _run("memory", "list", "--json")
    assert (example["question"], example["status"], example["reviewers"]) == (
        sc.PRODUCT_COUNT,
        "approved",
        ["rita"],
    )
    assert example["sql"] == item["sql"]


def test_decide_unknown_batch_and_resume_unknown_run() -> None:
    assert (
        _run("approvals", "decide", "batch_nope", "--file", "/dev/null", "--json", code=2)["error"][
            "code"
        ]
        == "batch_not_found"
    )
    assert _run("resume", "run_nope", "--json", code=2)["error"]["code"] == "run_not_found"


@pytest.mark.vcr
def test_an_overdue_batch_is_swept_and_the_run_ends_rejected(
    monkeypatch: pytest.MonkeyPatch, demo_db: Path, model_endpoint, vcr
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    db = f"sqlite:///{demo_db}"

    paused = _run(
        "ask", sc.PRODUCT_COUNT, "--db", db, "--defer", "--ttl", "0.001", "--json", code=11
    )
    [expired] = _run("approvals", "sweep", "--json")
    assert expired["run_id"] == paused["run_id"]
    assert _run("approvals", "sweep", "--json") == []  # applied exactly once

    done = _run("resume", paused["run_id"], "--json", code=4)
    assert done["status"] == "rejected" and done["error"]["code"] == "approval_expired"
    assert "SQLExecutor" not in [t["agent"] for t in done["trace"]]


def test_ttl_without_defer_is_refused() -> None:
    body = _run("ask", "q", "--db", "sqlite:///x.db", "--ttl", "5", "--json", code=2)
    assert "--defer" in body["error"]["message"]
