"""Batch 4: ResponseSynthesizer answers in plain language from a bounded view of the outcome."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, sections

#: Rows and characters per cell shown to the model: the answer must not depend on sending it all.
PREVIEW_ROWS = 20
PREVIEW_CELL_CHARS = 80


class SynthesizedAnswer(BaseModel):
    question_id: str = Field(description="The id of the question this answers, e.g. q1.")
    answer: str = Field(
        description="The answer to the analyst's question in plain language, with the key numbers."
    )
    caveats: list[str] = Field(
        default_factory=list,
        description="Limits of the answer the analyst should know (assumptions, truncation, errors).",
    )


class AnswerBatch(BaseModel):
    results: list[SynthesizedAnswer] = Field(
        description="One entry per question, each with its question_id; every question answered once."
    )


def render_preview(columns: list[str], rows: list[list[Any]], row_count: int) -> str:
    """A bounded, deterministic JSON preview of a result for the prompt."""

    def cell(value: Any) -> Any:
        if isinstance(value, str) and len(value) > PREVIEW_CELL_CHARS:
            return value[: PREVIEW_CELL_CHARS - 1] + "…"
        return value

    shown = [[cell(v) for v in row] for row in rows[:PREVIEW_ROWS]]
    body = json.dumps({"columns": columns, "rows": shown}, ensure_ascii=False, default=str)
    more = row_count - len(shown)
    return body + (f"\n({more} more rows not shown)" if more > 0 else "")


class ResponseSynthesizer(LLMAgent[AnswerBatch]):
    """Write each final answer from the question, the SQL and a result preview, or the failure."""

    setting: ClassVar[str] = "answer"
    agents: ClassVar[tuple[str, ...]] = ("ResponseSynthesizer",)
    batch: ClassVar[int] = 4
    output_model: ClassVar[type[BaseModel]] = AnswerBatch
    instructions: ClassVar[str] = """
You answer data analysts' questions in plain language from what the database returned. For EACH
question below (each has an id), use only the facts given in its section: the result preview, the
row count, warnings, or the schema for questions about the database itself. State key numbers
exactly as given. If the query failed or was rejected, say so plainly and what it means for the
question; never invent results. Return one result per question id.
"""

    @staticmethod
    def question_context(
        outcome: str, assumptions: list[str] | None = None, warnings: list[str] | None = None
    ) -> str:
        extra = ""
        if assumptions:
            extra += "Assumptions made:\n" + "\n".join(f"- {a}" for a in assumptions) + "\n"
        if warnings:
            extra += "Warnings:\n" + "\n".join(f"- {w}" for w in warnings) + "\n"
        return f"{extra}{outcome}"

    def build_messages(self, items: list[QuestionInput]) -> list[dict[str, str]]:
        return [self.system_message(), {"role": "user", "content": sections(items)}]


def describe_result(
    sql: str,
    columns: list[str],
    rows: list[list[Any]],
    row_count: int,
    *,
    truncated: bool = False,
) -> str:
    """The outcome of a statement for the answer: the SQL, the row count (said to be cut when
    the LIMIT or the row cap left rows out) and a bounded preview."""
    count = f"{row_count}"
    if truncated:
        count += (
            f" (TRUNCATED: the full result has more rows than the {row_count} kept; say that the "
            "rows were cut, and do not present counts, totals or rankings over them as complete)"
        )
    return f"SQL that ran:\n{sql}\nRow count: {count}\nResult preview:\n{render_preview(columns, rows, row_count)}"


def describe_failure(sql: str | None, failure: str) -> str:
    shown = f"SQL:\n{sql}\n" if sql else ""
    return f"{shown}The query did not produce a result: {failure}"


def describe_schema(schema: str) -> str:
    return f"The question is about the database itself. Schema:\n{schema}"
