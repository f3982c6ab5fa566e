"""A verdict carried to the gate: the statement the safety stage just validated is not validated
again, and a verdict that does not accept exactly the item's SQL counts for nothing."""

from __future__ import annotations

from typing import Any

from approval_fakes import StepClock

from approvals import ApprovalGate, ApprovalItem, ApproveAll, ItemCategory
from safety import SqlValidator


class Counted:
    """The real validator, counting the statements it is given."""

    def __init__(self, validator: SqlValidator) -> None:
        self.validator = validator
        self.seen: list[str] = []

    def __call__(self, sql: str) -> Any:
        self.seen.append(sql)
        return self.validator.validate(sql)


def _validator() -> Counted:
    return Counted(SqlValidator("sqlite", schema={"regions": ["region_id", "name"]}))


def _validated_item(validate: Counted, sql: str) -> tuple[ApprovalItem, Any]:
    """What the pipeline's safety stage does: validate, then an item of the validated SQL."""
    result = validate(sql)
    item = ApprovalItem.new(
        question_id="q1",
        question="regions?",
        sql=result.sql or sql,
        findings=list(result.findings),
        refused=not result.ok,
    )
    return item, result


def _gate(validate: Counted) -> ApprovalGate:
    return ApprovalGate(reviewer=ApproveAll(), validate=validate, clock=StepClock())


def test_a_carried_verdict_is_not_validated_again() -> None:
    validate = _validator()
    item, result = _validated_item(validate, "SELECT name FROM regions")
    assert result.sql != "SELECT name FROM regions"  # rewritten (a LIMIT added)
    outcome = _gate(validate).review([item], {item.call_id: result})
    assert validate.seen == ["SELECT name FROM regions"]  # the stage's one validation
    assert outcome.runnable(item.call_id) == result.sql


def test_without_a_verdict_the_gate_validates_the_item() -> None:
    validate = _validator()
    item, result = _validated_item(validate, "SELECT name FROM regions")
    _gate(validate).review([item])
    assert validate.seen == ["SELECT name FROM regions", result.sql]


def test_a_verdict_for_other_sql_is_not_trusted() -> None:
    """A verdict that accepted some other statement does not let this one through unchecked."""
    validate = _validator()
    _, harmless = _validated_item(validate, "SELECT name FROM regions")
    item = ApprovalItem.new(question_id="q1", question="?", sql="DELETE FROM regions")
    batch = _gate(validate).open([item], {item.call_id: harmless})
    assert validate.seen[-1] == "DELETE FROM regions"
    assert batch.categories[item.call_id] == ItemCategory.DENIED


def test_a_refusing_verdict_never_approves() -> None:
    validate = _validator()
    item, result = _validated_item(validate, "DELETE FROM regions")
    assert not result.ok and item.refused
    batch = _gate(validate).open([item], {item.call_id: result})
    assert batch.categories[item.call_id] == ItemCategory.DENIED
    assert not batch.pending
