"""Only validated statements run: the executor takes what a validator minted, never text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from orchestrator.core.stages.execution import validated
from safety import SafetyPolicy, SqlValidator, ValidatedStatement, ValidationResult

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def missing_engine(tmp_path: Path) -> sa.Engine:
    # The folder does not exist: any connection attempt would be database_unreachable.
    return sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'x.sqlite'}")


def test_a_statement_cannot_be_made_by_hand() -> None:
    with pytest.raises(TypeError):
        ValidatedStatement("SELECT LOAD_FILE('/etc/passwd')", "mysql", None, object())


def test_a_result_built_by_hand_carries_no_statement(missing_engine: sa.Engine) -> None:
    forged = ValidationResult(dialect="sqlite", original="x", sql="SELECT load_extension('x')")
    assert forged.ok and forged.statement is None
    with pytest.raises(ExecutionError) as caught:
        SQLExecutor(missing_engine).run(forged)
    assert caught.value.code == "unchecked_statement"
    parsed = ValidationResult.model_validate_json(
        SqlValidator("sqlite").validate("SELECT 1 AS a").model_dump_json()
    )
    assert parsed.statement is None  # a result read back from JSON was not minted here


@pytest.mark.parametrize("sql", ["SELECT LOAD_FILE('/etc/passwd')", "SELECT 1"])
def test_text_is_never_run(missing_engine: sa.Engine, sql: str) -> None:
    with pytest.raises(ExecutionError) as caught:
        SQLExecutor(missing_engine).run(sql)  # type: ignore[arg-type]
    assert caught.value.code == "unchecked_statement"


def test_the_validator_mints_what_it_accepts() -> None:
    validator = SqlValidator("sqlite", SafetyPolicy(max_limit=5))
    accepted = validator.validate("SELECT 1 AS a")
    assert accepted.statement is not None
    assert (accepted.statement.sql, accepted.statement.row_limit) == ("SELECT 1 AS a LIMIT 6", 5)
    assert validator.validate("SELECT load_extension('x')").statement is None


class TestExecutionStage:
    def test_approved_text_runs_only_as_it_renders(self) -> None:
        validator = SqlValidator("mysql")
        approved = validator.validate("SELECT 1 AS a").sql
        assert approved is not None
        assert validated(validator, approved).sql == approved
        with pytest.raises(ExecutionError) as caught:
            validated(validator, "SELECT LOAD_FILE('/etc/passwd') AS a LIMIT 1001")
        assert caught.value.code == "not_validated"
        with pytest.raises(ExecutionError) as caught:
            validated(validator, "select 1 as a")  # accepted, but not the text that was approved
        assert caught.value.code == "not_validated"


def test_only_the_validator_mints_statements() -> None:
    """No product module reaches the private constructor (tests of the database's own walls do)."""
    minting = []
    packages = ("orchestrator", "agents", "safety", "ratelimit", "approvals")
    for path in (p for package in packages for p in (ROOT / package).rglob("*.py")):
        if re.search(r"\b_minted\b", path.read_text(encoding="utf-8")):
            minting.append(path.relative_to(ROOT).as_posix())
    assert sorted(minting) == ["safety/statement.py", "safety/validator.py"]


class TestResolution:
    SCHEMA = {"customers": ["id", "email"], "pets": ["petid", "name"]}

    def test_a_subquery_inside_a_lambda_is_refused(self) -> None:
        sql = (
            "SELECT list_transform([1], email -> (SELECT max(email) FROM customers)) AS x FROM pets"
        )
        for policy in (SafetyPolicy(denied_columns=("customers.email",)), SafetyPolicy()):
            result = SqlValidator("duckdb", policy, schema=self.SCHEMA).validate(sql)
            assert result.refusal is not None and result.refusal.code == "opaque_reference"
        plain = "SELECT list_transform([1], x -> x + 1) AS x FROM pets"
        assert SqlValidator("duckdb", schema=self.SCHEMA).validate(plain).ok

    def test_references_are_resolved_without_rules(self) -> None:
        validator = SqlValidator("sqlite", schema=self.SCHEMA)
        assert validator.validate("SELECT nosuch FROM pets").refusal.code == "unresolved_column"
        assert validator.validate("SELECT name FROM pets").ok

    def test_a_refusal_is_told_once(self) -> None:
        validator = SqlValidator(
            "sqlite", SafetyPolicy(denied_columns=("customers.email",)), schema=self.SCHEMA
        )
        result = validator.validate("SELECT email FROM customers WHERE email = 'a' ORDER BY email")
        messages = [f.message for f in result.errors]
        assert len(messages) == len(set(messages)) == 1
