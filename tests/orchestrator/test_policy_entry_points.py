"""One policy for every entry point: ``--policy``/``SQLGATE_POLICY``, ``validate --db``, and edits
judged later (from another process) under the policy their batch was created under."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import DialectMismatch
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.cli.main import app
from safety import Policy
from tests.conftest import as_reviewer
from tests.scripted_llm import scenarios as sc

runner = CliRunner()

POLICY = """
[columns]
deny = ["products.cost", "employees.salary"]

[roles.analyst]
tables.deny = ["employees"]
max_limit = 50
"""


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return path


def _validate(*args: str, code: int) -> dict[str, object]:
    result = runner.invoke(app, ["validate", *args, "--json"])
    assert result.exit_code == code, result.output
    payload = json.loads(result.stdout)
    assert isinstance(payload, dict)
    return payload


def test_validate_with_db_resolves_against_the_real_schema(
    demo_db: Path, policy_file: Path
) -> None:
    db = f"sqlite:///{demo_db}"
    expanded = _validate("SELECT * FROM products", "--db", db, "--policy", str(policy_file), code=0)
    assert "cost" not in str(expanded["sql"]) and "price" in str(expanded["sql"])

    denied = _validate(
        "SELECT p.name, p.cost FROM products AS p", "--db", db, "--policy", str(policy_file), code=1
    )
    assert denied["code"] == "column_denied"
    # through an alias column list, the denied column is still seen
    renamed = _validate(
        "SELECT x.c FROM (SELECT name, cost FROM products) AS x(n, c)",
        "--db",
        db,
        "--policy",
        str(policy_file),
        code=1,
    )
    assert renamed["code"] == "column_denied"

    # Without the database nothing can be resolved: fail closed under column rules.
    unresolved = _validate("SELECT name FROM products", "--policy", str(policy_file), code=1)
    assert unresolved["code"] == "schema_unknown"
    # And the same statement without rules is fine without a database.
    assert _validate("SELECT name FROM products", code=0)["ok"] is True


def test_validate_takes_the_policy_from_the_environment_and_narrows_by_role(
    demo_db: Path, policy_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLGATE_POLICY", str(policy_file))
    db = f"sqlite:///{demo_db}"
    assert _validate("SELECT first_name FROM employees", "--db", db, code=0)["ok"] is True
    as_analyst = _validate(
        "SELECT first_name FROM employees", "--db", db, "--role", "analyst", code=1
    )
    assert as_analyst["code"] == "table_denied"
    capped = _validate("SELECT name FROM products", "--db", db, "--role", "analyst", code=0)
    assert str(capped["sql"]).endswith("LIMIT 51")  # one more than kept: a cut shows


def test_bad_policy_input_is_one_sentence_naming_the_key(
    demo_db: Path, tmp_path: Path, policy_file: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[columns]\ndeny = ["products.cost"]\nallwo = ["x"]\n')
    error = _validate("SELECT 1", "--policy", str(bad), code=2)["error"]
    assert isinstance(error, dict) and "columns.allwo" in error["message"]
    assert str(bad) in error["message"]

    missing = _validate("SELECT 1", "--policy", str(tmp_path / "nope.toml"), code=2)["error"]
    assert isinstance(missing, dict) and "cannot read" in missing["message"]

    role = _validate("SELECT 1", "--policy", str(policy_file), "--role", "intern", code=2)
    assert "roles.intern" in str(role["error"])

    mismatch = _validate(
        "SELECT 1", "--db", f"sqlite:///{demo_db}", "--dialect", "postgres", code=2
    )
    assert mismatch["error"] == {
        "code": "dialect_mismatch",
        "message": mismatch["error"]["message"],  # type: ignore[index]
    }


def test_the_target_factory_binds_dialect_policy_and_schema(demo_db: Path) -> None:
    policy = Policy.from_toml_text(POLICY)
    database = TargetDatabase(f"sqlite:///{demo_db}", policy=policy, statement_timeout_s=5)
    try:
        assert database.policy.statement_timeout == 5.0  # the option over the file
        validator = database.validator()
        assert validator.dialect == "sqlite" and validator.default_schema == "main"
        assert database.executor().row_cap == policy.row_cap
        context = database.gate_context(database.policy_for("analyst"))
        assert context["policy_fingerprint"] == database.policy.for_role("analyst").fingerprint()
        # an edit of that batch is judged under the analyst's policy, not the base one
        judged = database.validator_for(context).validate("SELECT first_name FROM employees")
        assert judged.refusal is not None and judged.refusal.code == "table_denied"
        assert database.validator().validate("SELECT first_name FROM employees").ok
        # a batch checked as another dialect is never judged (or run) on this engine
        with pytest.raises(DialectMismatch, match="checked as postgres"):
            database.validator_for({**context, "dialect": "postgres"})
        assert database.section_for("analyst") == "analyst"
        assert database.section_for("reviewer") is None  # no section: the base policy
    finally:
        database.dispose()


@pytest.mark.vcr
def test_an_edit_decided_elsewhere_is_judged_under_the_batch_policy(
    monkeypatch: pytest.MonkeyPatch,
    demo_db: Path,
    tmp_path: Path,
    policy_file: Path,
    model_endpoint: tuple[str, str],
    vcr: object,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    as_reviewer(monkeypatch, "alice")
    db = f"sqlite:///{demo_db}"

    asked = runner.invoke(
        app,
        ["ask", sc.PRODUCT_COUNT, "--db", db, "--defer", "--policy", str(policy_file), "--json"],
    )
    assert asked.exit_code == 11, asked.output
    run_id = json.loads(asked.stdout)["run_id"]
    state = StateDatabase()
    [record] = state.approvals.pending_batches(run_id=run_id)
    assert record.batch.context["policy_fingerprint"] == Policy.from_toml_text(POLICY).fingerprint()
    [item] = record.batch.items

    # The reviewer's shell has no policy: the batch's own is applied all the same.
    monkeypatch.delenv("SQLGATE_POLICY", raising=False)

    def decide(sql: str, *extra: str) -> tuple[int, dict[str, object]]:
        decisions = tmp_path / "decisions.json"
        decisions.write_text(json.dumps({item.call_id: {"action": "edit", "sql": sql}}))
        result = runner.invoke(
            app,
            ["approvals", "decide", record.batch_id, "--file", str(decisions), "--json", *extra],
        )
        return result.exit_code, json.loads(result.stdout)

    code, refused = decide("SELECT name, cost FROM products", "--db", db)
    assert code == 1 and "cost" in json.dumps(refused)
    code, unresolved = decide("SELECT name FROM products")  # no --db: fail closed
    assert code == 1 and "schema" in json.dumps(unresolved)
    code, wrong_db = decide("SELECT name FROM products", "--db", "sqlite:///elsewhere.db")
    assert code == 2 and "run's own database" in json.dumps(wrong_db)
    assert state.approvals.get_batch(record.batch_id).status == "pending"  # nothing changed

    code, decided = decide("SELECT * FROM products ORDER BY product_id", "--db", db)
    assert code == 0, decided
    resolution = decided["resolutions"][item.call_id]  # type: ignore[index]
    assert resolution["status"] == "edited"
    assert "cost" not in resolution["sql"] and "price" in resolution["sql"]

    resumed = runner.invoke(app, ["resume", run_id, "--json"])
    done = json.loads(resumed.stdout)
    assert done["status"] == "answered", resumed.output
    assert "cost" not in done["columns"]
