"""What the validator reports: findings and the overall result (pydantic, JSON-serialisable)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, field_validator

from .codes import check_code
from .statement import ValidatedStatement

__all__ = ["SafetyFinding", "Severity", "ValidationResult"]

Severity = Literal["error", "rewrite", "warning"]


class SafetyFinding(BaseModel):
    """One observation about a statement: a refusal, a rewrite, or a warning."""

    model_config = ConfigDict(frozen=True)

    code: str = Field(description="Stable machine-readable reason, snake_case, e.g. 'dml_in_tree'.")
    message: str = Field(description="One human sentence naming the offending node and what to do.")
    severity: Severity = Field(
        default="error",
        description="'error' refuses the statement; 'rewrite' records a change made; 'warning' informs.",
    )
    node: str | None = Field(default=None, description="sqlglot class name of the node concerned.")

    @field_validator("code")
    @classmethod
    def _registered(cls, code: str) -> str:
        check_code(code)  # every code has a kind in safety/codes.py
        return code

    @property
    def blocking(self) -> bool:
        return self.severity == "error"


class ValidationResult(BaseModel):
    """The validator's verdict on one SQL text."""

    dialect: str = Field(description="sqlglot dialect the text was parsed with.")
    original: str = Field(description="The SQL text as submitted.")
    sql: str | None = Field(
        default=None,
        description="The SQL to execute (re-rendered without comments, LIMIT enforced); None when refused.",
    )
    findings: list[SafetyFinding] = Field(
        default_factory=list, description="Every finding, rewrites included."
    )
    _statement: ValidatedStatement | None = PrivateAttr(default=None)

    @property
    def statement(self) -> ValidatedStatement | None:
        """What the executor may run: set by the validator that accepted the SQL, None when it
        refused it or when this result was built (or parsed back from JSON) anywhere else."""
        return self._statement if self.ok else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """False when the statement was refused."""
        return self.sql is not None and not any(f.blocking for f in self.findings)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def refusal(self) -> SafetyFinding | None:
        """The first blocking finding, or None."""
        return next((f for f in self.findings if f.blocking), None)

    @property
    def errors(self) -> list[SafetyFinding]:
        return [f for f in self.findings if f.blocking]

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]
