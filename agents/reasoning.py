"""Batch 1: IntentAnalyzer, ClarificationAgent, QueryDecomposer and QueryPlanner in ONE call.

The four logical agents answer together as one JSON object with four parts, so a question costs one
request for all of its reasoning instead of four.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from agents.llm_agent import LLMAgent
from agents.llm_batch import QuestionInput, sections


class Intent(str, Enum):  # noqa: UP042 - str() of a member is its qualified name, as before
    DATA_QUERY = "DATA_QUERY"
    META_QUERY = "META_QUERY"
    AMBIGUOUS = "AMBIGUOUS"


class IntentAnalysis(BaseModel):
    intent: Intent = Field(
        description="DATA_QUERY: needs rows from the database. META_QUERY: about the schema itself "
        "(which tables or columns exist, what they mean). AMBIGUOUS: cannot be answered without "
        "more information from the analyst."
    )
    confidence: float = Field(ge=0.0, le=1.0, description="How sure the classification is, 0 to 1.")
    rationale: str = Field(description="One sentence explaining the classification.")


class ClarifyingQuestion(BaseModel):
    id: str = Field(description="A short identifier for this question, unique within the reply.")
    text: str = Field(description="The question to ask the analyst.")


class Clarification(BaseModel):
    resolved: bool = Field(
        description="True when the question can be answered, possibly under stated assumptions; "
        "false when the analyst must answer the clarifying questions first."
    )
    assumptions: list[str] = Field(
        default_factory=list,
        description="Reasonable assumptions made to resolve vagueness (e.g. 'last year' = 2025).",
    )
    questions: list[ClarifyingQuestion] = Field(
        default_factory=list,
        description="Questions for the analyst; only when resolved is false.",
    )


class Decomposition(BaseModel):
    complexity: Literal["simple", "moderate", "complex"] = Field(
        description="simple: one table or one join; moderate: several joins or an aggregate with "
        "grouping; complex: subqueries, windows or several steps."
    )
    steps: list[str] = Field(
        default_factory=list, description="The logical steps to compute the answer, in order."
    )


class PlannedJoin(BaseModel):
    left: str = Field(description="Left table name.")
    right: str = Field(description="Right table name.")
    on: str = Field(description="The join condition, e.g. 'orders.customer_id = customers.id'.")


class PlannedFilter(BaseModel):
    table: str = Field(description="Table of the filtered column.")
    column: str = Field(description="The filtered column.")
    condition: str = Field(description="The condition in words or SQL, e.g. \"= 'shipped'\".")


class QueryPlan(BaseModel):
    tables: list[str] = Field(
        default_factory=list, description="Tables the SQL will read, by their exact names."
    )
    joins: list[PlannedJoin] = Field(
        default_factory=list, description="Joins between those tables."
    )
    filters: list[PlannedFilter] = Field(default_factory=list, description="Row filters.")
    aggregations: list[str] = Field(
        default_factory=list, description="Aggregates to compute, e.g. 'SUM(order_items.quantity)'."
    )
    order_by: list[str] = Field(default_factory=list, description="Ordering of the result.")
    needs_data_context: bool = Field(
        description="True when the SQL depends on actual values stored in a filtered column "
        "(spelling of a status, a region name) that the schema alone does not show."
    )


class ReasoningOutput(BaseModel):
    question_id: str = Field(description="The id of the question this reasoning is for, e.g. q1.")
    intent: IntentAnalysis = Field(description="IntentAnalyzer: what kind of question this is.")
    clarification: Clarification = Field(
        description="ClarificationAgent: assumptions, or questions when the ambiguity is unresolvable."
    )
    decomposition: Decomposition = Field(description="QueryDecomposer: complexity and steps.")
    plan: QueryPlan = Field(description="QueryPlanner: tables, joins, filters, data context need.")


class ReasoningBatch(BaseModel):
    results: list[ReasoningOutput] = Field(
        description="One entry per question, each with its question_id; every question answered once."
    )


class ReasoningAgent(LLMAgent[ReasoningBatch]):
    """Classify, clarify, decompose and plan one or several questions against a catalogue."""

    setting: ClassVar[str] = "reasoning"
    agents: ClassVar[tuple[str, ...]] = (
        "IntentAnalyzer",
        "ClarificationAgent",
        "QueryDecomposer",
        "QueryPlanner",
    )
    batch: ClassVar[int] = 1
    output_model: ClassVar[type[BaseModel]] = ReasoningBatch
    instructions: ClassVar[str] = """
You are the reasoning stage of a text-to-SQL system used by data analysts. For EACH analyst
question below (each has an id) and the database catalogue, do four jobs at once:
1. intent: DATA_QUERY, META_QUERY or AMBIGUOUS.
2. clarification: prefer stating reasonable assumptions and resolving the question; set
   resolved=false with clarifying questions only when no reasonable reading exists (e.g. the
   question names a metric or entity the database does not have, or could mean very different
   things).
3. decomposition: complexity and the steps to compute the answer.
4. plan: the exact table names from the catalogue, joins, filters, aggregates, ordering, and
   whether sample values of filtered columns are needed to write correct SQL.
For META_QUERY, plan the tables the answer is about (all of them for "which tables exist").
Questions are independent: reason about each on its own, and return one result per question id.
"""

    @staticmethod
    def question_context(notes: Sequence[str] = ()) -> str:
        """Business notes that match the question (none: empty, so the prompt is unchanged)."""
        if not notes:
            return ""
        return "Business notes (definitions agreed by the people who own the data):\n" + "\n".join(
            f"- {' '.join(n.split())}" for n in notes
        )

    def build_messages(
        self, items: list[QuestionInput], catalogue: str, dialect: str
    ) -> list[dict[str, str]]:
        return [
            self.system_message(),
            {
                "role": "user",
                "content": (
                    f"SQL dialect: {dialect}\n"
                    f"Database catalogue (table: columns):\n{catalogue}\n\n"
                    f"{sections(items)}"
                ),
            },
        ]
