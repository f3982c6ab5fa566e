"""SchemaExplorer and DataExplorer: what the plan needs to know about the database (no LLM)."""

from __future__ import annotations

from agents import DataExplorer, Intent, rank_tables
from agents.response_synthesizer import describe_schema
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import StageContext

__all__ = ["explore"]

#: Tables Batch 2 sees when the plan names none it can use: the best-ranked of a large schema.
UNPLANNED_TABLES = 30


def explore(p: StageContext, ctx: RunContext, qs: list[QuestionState]) -> None:
    """The planned tables (and their neighbours) for each question; sampled values if asked."""
    if not qs:
        return
    from agents.catalogue import LARGE_SCHEMA_TABLES

    all_tables = p.db.schema.tables()
    large = len(all_tables) > LARGE_SCHEMA_TABLES
    for done, q in enumerate(qs):
        ctx.progress("exploring schema", done, len(qs))
        assert q.reasoning is not None  # every question here went through Batch 1
        started = p.clock()
        planned = list(q.reasoning.plan.tables)
        if not planned or not p.db.schema.explore(planned, neighbours=False).tables:
            # Nothing usable planned: the whole schema if small, else the best-ranked tables.
            planned = (
                rank_tables(q.text, all_tables, limit=UNPLANNED_TABLES)
                if large
                else list(all_tables)
            )
        q.schema = p.db.schema.explore(planned, incoming=not large)
        q.note(
            "SchemaExplorer",
            f"planned tables: {', '.join(planned) or '-'}",
            q.schema.summary(),
            started=started,
            extra_ms=ctx.catalogue_ms,
        )
        if q.reasoning.intent.intent == Intent.META_QUERY:
            q.failure = None
            q.after_synthesis = RunStatus.ANSWERED
            q.meta_outcome = describe_schema(q.schema.render())
            continue
        filters = list(q.reasoning.plan.filters)
        if q.reasoning.plan.needs_data_context and filters:
            started = p.clock()
            explored = DataExplorer(p.db.engine_for(p.run_policy(ctx))).explore(
                filters, schema=q.schema
            )
            q.data_context = explored.render()
            q.note(
                "DataExplorer",
                f"{len(filters)} filter column(s)",
                explored.summary(),
                started=started,
            )
    ctx.progress("exploring schema", len(qs), len(qs))
