"""Risk a reviewer can see before deciding, and the approval rule each level carries.

A ``StatementRisk`` is what the engine and the policy say about one statement before anyone
runs it: the engine's own estimate (``EXPLAIN``, or SQLite's ``EXPLAIN QUERY PLAN``), the
tables it reads and the sensitive columns among them, the rows expected and whether the row
cap will cut the result, then a level (``low`` / ``medium`` / ``high``) with the reasons.
It travels inside the item's JSON, so every screen (page, terminal, MCP) and the audit log
show the same facts.

``RiskApproval`` maps a level to the approval rule: how many distinct reviewers a batch needs
when it holds a statement of that level, and which levels an auto-approval policy may approve.
``high`` is never auto-approved, whatever the configuration says (fail closed).

Example:
    >>> rule = RiskApproval(quorum={"high": 2}, auto_levels=frozenset({"low", "high"}))
    >>> rule.quorum_for("high"), rule.quorum_for("low"), rule.may_auto_approve("high")
    (2, 1, False)
    >>> StatementRisk(level="medium", reasons=["full scan of orders"]).summary()
    'medium: full scan of orders'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RiskLevel = Literal["low", "medium", "high"]
RISK_LEVELS: tuple[RiskLevel, ...] = ("low", "medium", "high")


def higher(a: RiskLevel, b: RiskLevel) -> RiskLevel:
    """The higher of two levels."""
    return a if RISK_LEVELS.index(a) >= RISK_LEVELS.index(b) else b


class StatementRisk(BaseModel):
    """The reviewer's view of what one statement will cost and touch, taken before review."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: RiskLevel = Field(description="low, medium or high, from the policy's [risk] rules")
    reasons: list[str] = Field(default_factory=list, description="Why the level is what it is")
    engine: str | None = Field(default=None, description="The dialect whose planner was asked")
    estimate: str | None = Field(
        default=None, description="The planner's estimate in one line (cost, plan rows, scans)"
    )
    estimate_error: str | None = Field(
        default=None, description="Why no estimate could be taken (timeout, planner error)"
    )
    rows_expected: int | None = Field(
        default=None, description="Rows the statement is expected to return (None: unknown)"
    )
    full_scans: list[str] = Field(
        default_factory=list, description="Tables the plan reads from end to end"
    )
    tables: list[str] = Field(default_factory=list, description="Tables the statement reads")
    sensitive_columns: list[str] = Field(
        default_factory=list, description="table.column names read that the policy marks sensitive"
    )
    row_cap: int | None = Field(default=None, description="The row cap the result is kept under")
    row_cap_cuts: bool | None = Field(
        default=None, description="The expected rows exceed the row cap (None: unknown)"
    )

    def summary(self) -> str:
        """One line for a list, a terminal or a notification."""
        return f"{self.level}: {'; '.join(self.reasons)}" if self.reasons else self.level


@dataclass(frozen=True)
class RiskApproval:
    """The approval rule of each risk level.

    ``quorum``: level -> distinct reviewers a batch holding such a statement needs (levels not
    named need 1; the gate's own quorum is a floor). ``auto_levels``: levels an auto-approval
    policy may approve; ``high`` is dropped from it.
    """

    quorum: Mapping[str, int] = field(default_factory=dict)
    auto_levels: frozenset[str] = frozenset({"low", "medium"})

    def __post_init__(self) -> None:
        if any(n < 1 for n in self.quorum.values()):
            raise ValueError("a risk level's quorum must be at least 1")
        object.__setattr__(self, "auto_levels", frozenset(self.auto_levels) - {"high"})

    def quorum_for(self, level: str) -> int:
        return int(self.quorum.get(level, 1))

    def may_auto_approve(self, level: str) -> bool:
        return level in self.auto_levels
