"""Batch 4: the answer in plain language, from the question, the SQL and a bounded preview."""

from __future__ import annotations

from agents import ResponseSynthesizer
from agents.llm_batch import QuestionInput
from agents.response_synthesizer import describe_failure, describe_result
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import ModelCalls

__all__ = ["synthesize"]


def _outcome(q: QuestionState) -> str:
    if q.meta_outcome is not None:
        return q.meta_outcome
    if q.result is not None:
        return describe_result(
            q.sql or "",
            q.result.columns,
            q.result.rows,
            q.result.row_count,
            truncated=bool(q.result.truncated),
        )
    return describe_failure(q.sql, q.failure or "unknown failure")


def synthesize(p: ModelCalls, ctx: RunContext, qs: list[QuestionState]) -> None:
    for q in [q for q in qs if q.agent_sql]:  # the caller's own SQL: its result, no model call
        q.answer = _outcome(q)
        q.finish(q.after_synthesis or RunStatus.ANSWERED, q.error)
        ctx.emit()
    qs = [q for q in qs if not q.agent_sql]
    if not qs:
        return
    agent = ResponseSynthesizer()

    def inputs(q: QuestionState) -> QuestionInput:
        return QuestionInput(
            q.qid,
            q.text.strip(),
            ResponseSynthesizer.question_context(_outcome(q), q.assumptions, q.warnings),
        )

    calls = ctx.batched_calls(p.llm, k=p.config.k, max_prompt_chars=p.config.max_prompt_chars)
    for q, answer, call in calls("writing the answer", agent, qs, agent.build_messages, inputs):
        q.answer = answer.answer
        q.warnings += [c for c in answer.caveats if c not in q.warnings]
        q.note("ResponseSynthesizer", _outcome(q), answer.answer, batch=4, call=call)
        q.finish(q.after_synthesis or RunStatus.ANSWERED, q.error)
        ctx.emit(flush=False, only=q)  # each result out as soon as it is written
    ctx.emit()  # the stage is done: its results made durable together
