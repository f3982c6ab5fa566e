"""Row filters at a terminal: ``sqlgate ask`` is asked with the attributes of the token
``SQLGATE_REVIEWER_TOKEN`` proves (its entry's ``attributes``), recorded with the run so that
``sqlgate resume`` keeps them; without a proven token nothing binds the filter and the filtered
table is refused (``row_filter_unbound``), whatever a free variable says."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.core.errors import ConfigurationError
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.cli.main import app
from orchestrator.interfaces.reviewer_identity import cli_asker_identity
from tests.scripted_llm import scenarios as sc

runner = CliRunner()

POLICY = '[rows]\n"products" = "category_id = {user.category_id}"\n'
TOKENS = json.dumps(
    [
        {"token": "ann-token", "actor": "ann", "role": "admin", "attributes": {"category_id": 1}},
        {"token": "rita-token", "actor": "rita", "role": "reviewer"},
    ]
)


def test_attributes_come_from_the_proven_token_only() -> None:
    env = {"SQLGATE_TOKENS": TOKENS}
    assert cli_asker_identity({**env, "SQLGATE_REVIEWER_TOKEN": "ann-token"}) == {"category_id": 1}
    assert cli_asker_identity({**env, "SQLGATE_REVIEWER_TOKEN": "rita-token"}) is None
    assert cli_asker_identity({**env, "SQLGATE_REVIEWER": "ann"}) is None  # a name proves nothing
    with pytest.raises(ConfigurationError, match="SQLGATE_REVIEWER_TOKEN"):
        cli_asker_identity({**env, "SQLGATE_REVIEWER_TOKEN": "guessed"})


@pytest.mark.vcr
def test_ask_and_resume_keep_the_token_attributes_and_none_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    demo_db: Path,
    tmp_path: Path,
    model_endpoint: tuple[str, str],
    vcr: object,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    monkeypatch.setenv("SQLGATE_RATE_LIMIT", "100/60")
    monkeypatch.delenv("SQLGATE_TOKENS_FILE", raising=False)
    monkeypatch.setenv("SQLGATE_TOKENS", TOKENS)
    monkeypatch.setenv("SQLGATE_REVIEWER_TOKEN", "ann-token")
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    db = f"sqlite:///{demo_db}"
    ask = ["ask", sc.PRODUCT_COUNT, "--db", db, "--defer", "--policy", str(policy), "--json"]

    asked = runner.invoke(app, ask)
    assert asked.exit_code == 11, asked.output
    run_id = json.loads(asked.stdout)["run_id"]
    [record] = StateDatabase().approvals.pending_batches(run_id=run_id)
    assert record.batch.context["identity"] == {"category_id": 1}
    [item] = record.batch.items
    assert "category_id = 1" in (item.sql or "")

    decisions = tmp_path / "decisions.json"
    decisions.write_text(json.dumps({item.call_id: {"action": "approve"}}))
    monkeypatch.setenv("SQLGATE_REVIEWER_TOKEN", "rita-token")  # another person decides
    decided = runner.invoke(
        app, ["approvals", "decide", record.batch_id, "--file", str(decisions), "--json"]
    )
    assert decided.exit_code == 0, decided.output
    resumed = runner.invoke(app, ["resume", run_id, "--json"])  # as rita: the ASKER's filter
    done = json.loads(resumed.stdout)
    assert done["status"] == "answered", resumed.output
    with sqlite3.connect(demo_db) as conn:
        (name,) = conn.execute("SELECT name FROM categories WHERE category_id = 1").fetchone()
        (count,) = conn.execute("SELECT COUNT(*) FROM products WHERE category_id = 1").fetchone()
    assert done["rows_preview"] == [[name, count]]

    monkeypatch.delenv("SQLGATE_REVIEWER_TOKEN")
    monkeypatch.setenv("SQLGATE_REVIEWER", "ann")  # a free variable binds nothing
    refused = runner.invoke(app, ask)
    assert "row_filter_unbound" in refused.stdout, refused.output
    assert json.loads(refused.stdout)["status"] != "answered"


def test_validate_binds_the_filter_as_ask_does(
    monkeypatch: pytest.MonkeyPatch, demo_db: Path, tmp_path: Path
) -> None:
    monkeypatch.delenv("SQLGATE_TOKENS_FILE", raising=False)
    monkeypatch.setenv("SQLGATE_TOKENS", TOKENS)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    check = ["validate", "SELECT name FROM products", "--db", f"sqlite:///{demo_db}"]
    check += ["--policy", str(policy), "--json"]

    monkeypatch.setenv("SQLGATE_REVIEWER_TOKEN", "ann-token")
    bound = runner.invoke(app, check)
    assert bound.exit_code == 0, bound.output
    assert "category_id = 1" in json.loads(bound.stdout)["sql"]

    monkeypatch.delenv("SQLGATE_REVIEWER_TOKEN")
    unbound = runner.invoke(app, check)
    assert unbound.exit_code == 1 and json.loads(unbound.stdout)["code"] == "row_filter_unbound"
