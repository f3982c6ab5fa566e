"""Before and during Batch 1: input checks, admission control, then one reasoning call."""

from __future__ import annotations

from agents import ReasoningAgent
from agents.catalogue import Catalogue, build_catalogue, index_for
from agents.llm_batch import QuestionInput
from agents.reasoning import ClarifyingQuestion
from orchestrator.core.question import QuestionState
from orchestrator.core.result import ClarifyingQuestionOut, RunError, RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import ModelCalls, StageContext

__all__ = ["admit", "check_input", "reason"]


def check_input(p: ModelCalls, q: QuestionState) -> None:
    """An empty or oversized question ends at once, before any call."""
    text = q.text.strip()
    if not text:
        q.finish(
            RunStatus.INVALID_INPUT,
            RunError(code="empty_question", message="the question is empty"),
        )
    elif len(text) > p.config.max_question_chars:
        q.finish(
            RunStatus.INVALID_INPUT,
            RunError(
                code="question_too_long",
                message=f"the question has {len(text)} characters; the limit is "
                f"{p.config.max_question_chars}",
            ),
        )


def admit(p: ModelCalls, ctx: RunContext) -> None:
    """Admission control: refuse up front when the worst case (5 requests per chunk) cannot fit."""
    active = [q for q in ctx.active() if not q.agent_sql]  # the caller's SQL asks no model
    limiter = p.llm.limiter
    if not p.config.admission or not active or getattr(limiter, "mode", "") != "fail_fast":
        return
    chunks = -(-len(active) // p.config.k)
    worst = (3 + p.config.max_corrections) * chunks
    wait = limiter.fits(worst)
    if wait > 0:
        message = (
            f"this run may need up to {worst} LLM requests and the rate limit has room for fewer "
            "now; nothing was sent"
        )
        for q in active:
            q.finish(
                RunStatus.RATE_LIMITED,
                RunError(
                    code="rate_limited",
                    message=message,
                    retry_after=None if wait == float("inf") else wait,
                ),
            )


def reason(p: StageContext, ctx: RunContext, qs: list[QuestionState]) -> None:
    """Batch 1: intent, clarification, decomposition and plan, in one call per chunk."""
    if not qs:
        return
    from agents.catalogue import LARGE_SCHEMA_TABLES

    started = p.clock()
    tables = p.db.schema.tables()
    # a large schema's catalogue is ranked: the values a question names count (read once per
    # schema, never from a column the run's policy hides)
    large = len(tables) > LARGE_SCHEMA_TABLES
    values = p.db.value_index() if large else None
    readable = p.db.readable(p.run_policy(ctx)) if large else None
    vocabulary = p.hooks.vocabulary
    index = index_for(tables, usage=vocabulary(p) if vocabulary else None) if large else None
    ctx.catalogue_ms = (p.clock() - started) * 1000.0
    agent = ReasoningAgent()
    notes = p.hooks.notes(p, qs) if p.hooks.notes else {}  # business notes; no LLM call
    answered = p.hooks.answered  # a follow-up's answers, taken as settled

    seen: dict[str, Catalogue] = {}  # qid -> the catalogue its reasoning call saw
    hints = {q.qid: q.hint for q in qs if q.hint}  # ranked with their questions

    def build(items: list[QuestionInput]) -> list[dict[str, str]]:
        catalogue = build_catalogue(
            [i.question for i in items],
            tables,
            always_include_all_below=LARGE_SCHEMA_TABLES,
            index=index,
            values=values,
            readable=readable,
            hints=[hints.get(i.id, "") for i in items],
        )
        ctx.catalogue_ms += catalogue.ranking_ms
        for item in items:
            seen[item.id] = catalogue
        return agent.build_messages(items, catalogue.text, p.db.dialect)

    def inputs(q: QuestionState) -> QuestionInput:
        # A follow-up carries the analyst's answers in its text; Batch 1 is told to take them
        # as settled (an ordinary question's prompt is unchanged).
        context = "\n".join(
            part
            for part in (
                answered(q.text) if answered else "",
                f"Hint from the asker: {q.hint}" if q.hint else "",
                ReasoningAgent.question_context(notes.get(q.qid, ())),
            )
            if part
        )
        return QuestionInput(q.qid, q.text.strip(), context)

    calls = ctx.batched_calls(p.llm, k=p.config.k, max_prompt_chars=p.config.max_prompt_chars)
    for q, reasoning, call in calls("reasoning", agent, qs, build, inputs):
        q.reasoning = reasoning
        c = reasoning.clarification
        outputs = {
            "IntentAnalyzer": f"{reasoning.intent.intent.value} ({reasoning.intent.confidence:.2f})",
            "ClarificationAgent": (
                f"resolved, {len(c.assumptions)} assumption(s)"
                if c.resolved
                else f"unresolved, {len(c.questions)} question(s)"
            ),
            "QueryDecomposer": f"{reasoning.decomposition.complexity}, "
            f"{len(reasoning.decomposition.steps)} step(s)",
            "QueryPlanner": f"tables: {', '.join(reasoning.plan.tables) or '-'}; "
            f"data context: {'yes' if reasoning.plan.needs_data_context else 'no'}"
            + catalogue_summary(seen.get(q.qid), len(tables)),
        }
        for name in ReasoningAgent.agents:
            q.note(name, q.text, outputs[name], batch=1, call=call)
        q.assumptions = list(c.assumptions)
        if not c.resolved:
            q.clarification_questions = unique_questions(c.questions)
            q.finish(RunStatus.NEEDS_CLARIFICATION)


def catalogue_summary(catalogue: Catalogue | None, total: int) -> str:
    """What the planner was shown: the whole schema, or which tables (ranked, and how fast)."""
    if catalogue is None or catalogue.whole_schema:
        return ""
    shown = ", ".join(catalogue.shown[:5]) + (", ..." if len(catalogue.shown) > 5 else "")
    return (
        f"; catalogue: {len(catalogue.shown)} of {total} tables shown, "
        f"{len(catalogue.named)} named, ranked in {catalogue.ranking_ms:.1f} ms ({shown})"
    )


def unique_questions(questions: list[ClarifyingQuestion]) -> list[ClarifyingQuestionOut]:
    """The clarifying questions with ids unique within the question (models repeat ids)."""
    if not questions:
        return [
            ClarifyingQuestionOut(
                id="c1",
                text="Could you restate the question naming the measure and the data you mean?",
            )
        ]
    seen: set[str] = set()
    out = []
    for n, q in enumerate(questions, start=1):
        qid = q.id.strip() or f"c{n}"
        if qid in seen:
            qid = f"c{n}"
        while qid in seen:
            qid += "_"
        seen.add(qid)
        out.append(ClarifyingQuestionOut(id=qid, text=q.text))
    return out
