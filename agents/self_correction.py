"""Batch 3: SelfCorrection repairs SQL that failed, from the error, the SQL and the schema."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, sections


class CorrectedSQL(BaseModel):
    question_id: str = Field(description="The id of the question whose SQL is corrected, e.g. q1.")
    diagnosis: str = Field(description="What was wrong with the failed SQL, in one sentence.")
    sql: str = Field(description="The corrected single SELECT statement, no comments.")


class CorrectionBatch(BaseModel):
    results: list[CorrectedSQL] = Field(
        description="One entry per question, each with its question_id; every question answered once."
    )


class SelfCorrection(LLMAgent[CorrectionBatch]):
    """One correction attempt per question; the orchestrator allows at most two per question."""

    setting: ClassVar[str] = "correction"
    agents: ClassVar[tuple[str, ...]] = ("SelfCorrection",)
    batch: ClassVar[int] = 3
    output_model: ClassVar[type[BaseModel]] = CorrectionBatch
    instructions: ClassVar[str] = """
SQL queries written for data analysts failed. For EACH question below (each has an id), diagnose
the error and write a corrected query: exactly ONE read-only SELECT (or WITH ... SELECT) in the
given dialect, using only the tables and columns in the schema, with explicit column names (never
SELECT *). Never modify data. Return one result per question id.
"""

    @staticmethod
    def question_context(failed_sql: str, error: str, attempt: int) -> str:
        return f"Failed SQL (attempt {attempt}):\n{failed_sql}\nError:\n{error}"

    def build_messages(
        self, items: list[QuestionInput], schema: str, dialect: str
    ) -> list[dict[str, str]]:
        return [
            self.system_message(),
            {
                "role": "user",
                "content": f"SQL dialect: {dialect}\nSchema:\n{schema}\n\n{sections(items)}",
            },
        ]
