"""Batch 3: SelfCorrection repairs SQL that failed, from the error, the SQL and the schema."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from agents.llm_agent import LLMAgent


class CorrectedSQL(BaseModel):
    diagnosis: str = Field(description="What was wrong with the failed SQL, in one sentence.")
    sql: str = Field(description="The corrected single SELECT statement, no comments.")


class SelfCorrection(LLMAgent[CorrectedSQL]):
    """One correction attempt; the orchestrator allows at most two per question."""

    agents: ClassVar[tuple[str, ...]] = ("SelfCorrection",)
    batch: ClassVar[int] = 3
    output_model: ClassVar[type[BaseModel]] = CorrectedSQL
    instructions: ClassVar[str] = """
A SQL query written for a data analyst failed. Diagnose the error and write a corrected query:
exactly ONE read-only SELECT (or WITH ... SELECT) in the given dialect, using only the tables and
columns in the schema, with explicit column names (never SELECT *). Never modify data.
"""

    def build_messages(
        self,
        question: str,
        failed_sql: str,
        error: str,
        schema: str,
        dialect: str,
        attempt: int,
    ) -> list[dict[str, str]]:
        return [
            self.system_message(),
            {
                "role": "user",
                "content": (
                    f"SQL dialect: {dialect}\n"
                    f"Schema:\n{schema}\n\n"
                    f"Analyst's question: {question}\n"
                    f"Failed SQL (attempt {attempt}):\n{failed_sql}\n"
                    f"Error:\n{error}"
                ),
            },
        ]
