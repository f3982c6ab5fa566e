"""Batch 2: SQLGenerator writes one read-only query per question, in the target dialect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, sections
from agents.reasoning import ReasoningOutput


class GeneratedSQL(BaseModel):
    question_id: str = Field(description="The id of the question this SQL answers, e.g. q1.")
    sql: str = Field(
        description="Exactly one SELECT statement (WITH ... SELECT allowed), no comments."
    )
    explanation: str = Field(
        description="One or two sentences on how the query answers the question."
    )


class SQLBatch(BaseModel):
    results: list[GeneratedSQL] = Field(
        description="One entry per question, each with its question_id; every question answered once."
    )


def render_plan(reasoning: ReasoningOutput) -> str:
    """The planner's output as compact text for later prompts."""
    plan = reasoning.plan
    lines = [f"complexity: {reasoning.decomposition.complexity}"]
    lines += [f"step: {s}" for s in reasoning.decomposition.steps]
    lines += [f"assumption: {a}" for a in reasoning.clarification.assumptions]
    lines.append(f"tables: {', '.join(plan.tables) or '-'}")
    lines += [f"join: {j.left} ~ {j.right} ON {j.on}" for j in plan.joins]
    lines += [f"filter: {f.table}.{f.column} {f.condition}" for f in plan.filters]
    lines += [f"aggregate: {a}" for a in plan.aggregations]
    lines += [f"order by: {o}" for o in plan.order_by]
    return "\n".join(lines)


class SQLGenerator(LLMAgent[SQLBatch]):
    """Turn each question's plan plus the explored schema (and sample values) into SQL."""

    setting: ClassVar[str] = "sql"
    agents: ClassVar[tuple[str, ...]] = ("SQLGenerator",)
    batch: ClassVar[int] = 2
    output_model: ClassVar[type[BaseModel]] = SQLBatch
    instructions: ClassVar[str] = """
You write SQL for data analysts. For EACH question below (each has an id and a plan), write
exactly ONE read-only query (SELECT, or WITH ... SELECT) in the given dialect that answers it
following its plan. Rules: use only tables and columns shown in the schema; name every output
column explicitly (never SELECT *); give computed columns clear aliases; qualify columns when more
than one table is involved; add ORDER BY when the question implies ranking; add LIMIT for "top N"
questions. Never modify data. Return one result per question id.
"""

    @staticmethod
    def question_context(
        reasoning: ReasoningOutput, examples: Sequence[tuple[str, str]] = ()
    ) -> str:
        """The question's plan, then the reviewed (question, SQL) examples memory found for it
        (none: the text is exactly the plan)."""
        context = f"Plan:\n{render_plan(reasoning)}"
        if examples:
            context += (
                "\nReviewed examples (similar questions whose SQL a reviewer approved on this "
                "database; follow their tables and conventions where they fit, but answer THIS "
                "question):\n"
                + "\n".join(f"-- {' '.join(q.split())}\n{sql.strip()}" for q, sql in examples)
            )
        return context

    def build_messages(
        self, items: list[QuestionInput], schema: str, data_context: str, dialect: str
    ) -> list[dict[str, str]]:
        context = f"\nSample values of filtered columns:\n{data_context}\n" if data_context else ""
        return [
            self.system_message(),
            {
                "role": "user",
                "content": f"SQL dialect: {dialect}\nSchema:\n{schema}\n{context}\n{sections(items)}",
            },
        ]
