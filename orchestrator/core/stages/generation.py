"""Batch 2: SQL for each question's plan, in the target dialect."""

from __future__ import annotations

from collections.abc import Iterable

from agents import SchemaContext, SQLGenerator
from agents.llm_batch import QuestionInput
from agents.schema_explorer import TableInfo
from orchestrator.core.question import QuestionState
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import StageContext

__all__ = ["generate", "joined", "schema_text"]


def generate(p: StageContext, ctx: RunContext, qs: list[QuestionState]) -> None:
    if not qs:
        return
    agent = SQLGenerator()
    by_id = {q.qid: q for q in qs}
    # reviewed (question, SQL) pairs per question; no LLM call
    examples = p.hooks.examples(p, qs) if p.hooks.examples else {}

    def build(items: list[QuestionInput]) -> list[dict[str, str]]:
        chunk = [by_id[i.id] for i in items]
        return agent.build_messages(
            items,
            schema_text(p.db.dialect, chunk),
            joined(q.data_context for q in chunk),
            p.db.dialect,
        )

    def inputs(q: QuestionState) -> QuestionInput:
        return QuestionInput(
            q.qid,
            q.text.strip(),
            SQLGenerator.question_context(q.reasoning, examples.get(q.qid, ())),
        )

    calls = ctx.batched_calls(p.llm, k=p.config.k, max_prompt_chars=p.config.max_prompt_chars)
    for q, draft, call in calls("writing SQL", agent, qs, build, inputs):
        q.pending_sql = draft.sql
        q.note("SQLGenerator", q.text, draft.sql, batch=2, call=call)


def schema_text(dialect: str, qs: list[QuestionState]) -> str:
    """The explored tables of several questions, each table once."""
    if len(qs) == 1 and qs[0].schema is not None:
        return qs[0].schema.render()
    tables: dict[str, TableInfo] = {}
    for q in qs:
        for table in q.schema.tables if q.schema else ():
            tables.setdefault(table.name, table)
    return SchemaContext(dialect=dialect, tables=list(tables.values())).render()


def joined(parts: Iterable[str]) -> str:
    """Lines of several texts, each line once, in first-seen order."""
    seen: list[str] = []
    for part in parts:
        for line in part.splitlines():
            if line not in seen:
                seen.append(line)
    return "\n".join(seen)
