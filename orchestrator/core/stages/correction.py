"""Batch 3: a failed statement, its error and the schema in; fixed SQL out (re-validated and
re-approved in the next cycle, being new SQL)."""

from __future__ import annotations

from agents import SelfCorrection
from agents.llm_batch import QuestionInput
from orchestrator.core.question import QuestionState
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import StageContext
from orchestrator.core.stages.generation import schema_text

__all__ = ["correct"]


def correct(p: StageContext, ctx: RunContext, qs: list[QuestionState]) -> None:
    agent = SelfCorrection()
    for q in qs:
        q.corrections += 1
    by_id = {q.qid: q for q in qs}

    def build(items: list[QuestionInput]) -> list[dict[str, str]]:
        return agent.build_messages(
            items, schema_text(p.db.dialect, [by_id[i.id] for i in items]), p.db.dialect
        )

    def inputs(q: QuestionState) -> QuestionInput:
        return QuestionInput(
            q.qid,
            q.text.strip(),
            SelfCorrection.question_context(q.sql or "", q.correction_error or "", q.corrections),
        )

    calls = ctx.batched_calls(p.llm, k=p.config.k, max_prompt_chars=p.config.max_prompt_chars)
    for q, fix, call in calls("correcting SQL", agent, qs, build, inputs):
        q.note("SelfCorrection", q.correction_error or "", fix.sql, batch=3, call=call)
        q.pending_sql = fix.sql
    for q in qs:
        q.correction_error = None
