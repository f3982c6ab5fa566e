"""A refusal the model can fix goes to self-correction with the finding, within the budget of two
corrections; a refusal that is an attack does not."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from approvals import ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.result import RunStatus
from orchestrator.core.stages.approval import _verdict
from safety import Policy, SafetyFinding, SafetyPolicy, SqlValidator, ValidationResult
from tests.orchestrator.conftest import Harness, interactions
from tests.scripted_llm import scenarios as sc

#: A column policy: every reference must resolve to an allowed column, so a double-quoted string
#: PostgreSQL reads as a column is refused by the validator before anything runs.
COLUMN_POLICY = """
[columns]
deny = ["pets.weight"]
"""


def _pets(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE pets (petid INTEGER PRIMARY KEY, pettype TEXT, pet_age INTEGER, "
            "weight REAL)"
        )
        conn.exec_driver_sql(
            "INSERT INTO pets VALUES (1, 'cat', 3, 12.0), (2, 'dog', 2, 13.4), (3, 'dog', 1, 9.3), "
            "(4, 'cat', 5, 4.1)"
        )
    engine.dispose()


@pytest.mark.vcr
def test_a_double_quoted_string_under_a_column_policy_is_corrected_and_answered(
    harness: Harness, postgres_database: str, vcr
) -> None:
    _pets(postgres_database)
    database = TargetDatabase(postgres_database, policy=Policy.from_toml_text(COLUMN_POLICY))
    try:
        result = Pipeline(database, harness.llm(), ApproveAll()).ask(sc.CATS_QUOTED)
    finally:
        database.dispose()

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 4 == interactions(vcr)
    refused, accepted = [t for t in result.trace if t.agent == "SafetyValidator"]
    assert "refused: unresolved_column" in refused.output_summary
    correction = next(t for t in result.trace if t.agent == "SelfCorrection")
    assert correction.input_summary.startswith("unresolved_column: ")
    assert "cat" in correction.input_summary
    assert result.rows_preview == [[2]]
    assert result.answer == "There are 2 cats."


def test_one_forbidden_finding_decides_even_beside_a_correctable_one() -> None:
    both = ValidationResult(
        dialect="postgres",
        original="SELECT nope FROM pets WHERE petid IN (SELECT pg_sleep(1))",
        findings=[
            SafetyFinding(code="unresolved_column", message="Column 'nope' could not be resolved."),
            SafetyFinding(code="function_denied", message="pg_sleep may not be called."),
        ],
    )
    assert _verdict(both) == ("function_denied", "pg_sleep may not be called.")

    validator = SqlValidator(
        "postgres",
        policy=SafetyPolicy(
            denied_columns=("pets.weight",), allowed_columns=("pets.petid", "pets.pettype")
        ),
        schema={"pets": ["petid", "pettype", "pet_age", "weight"]},
    )
    several = validator.validate("SELECT weight, pet_age FROM pets")
    code, message = _verdict(several)
    assert code == "column_denied"
    assert message is not None and "pets.weight" in message and "pets.pet_age" in message, message
