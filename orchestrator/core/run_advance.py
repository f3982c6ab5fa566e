"""The stages in order, and how a run ends: paused at the gate, finished, or taken over.

``held`` advances one run under its lease (when it is recorded): from the start, from a decided
gate (cycle, pending statements, outcome), or (``"executed"``) from results whose answers are
still to be written. What stops a whole run (the rate limit, a cancelled approval, the database
or the model endpoint failing) ends each of its questions with that status; a pause or a lost
lease is written to the run's record (``run_record``).
"""

from __future__ import annotations

from typing import Literal

from agents import SchemaInspectionError
from approvals import ApprovalCancelled, ApprovalOutcome
from orchestrator.core import stages, telemetry
from orchestrator.core.errors import DatabaseError, LLMError, RunConflict
from orchestrator.core.lease import Lease
from orchestrator.core.question import PausedAtGate, PendingStatement
from orchestrator.core.result import RunError, RunResult, RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.run_record import RunRecord
from orchestrator.core.stage_context import StageContext
from ratelimit import RateLimitError

__all__ = ["Resumed", "advance", "held"]

#: Where a run carries on from: the start (None), a decided gate (cycle, pending statements,
#: outcome), or results whose answers are still to be written ("executed").
Resumed = tuple[int, dict[str, PendingStatement], ApprovalOutcome] | Literal["executed"] | None


def held(
    p: StageContext, record: RunRecord | None, ctx: RunContext, *, resumed: Resumed
) -> list[RunResult]:
    """Advance the run, holding its lease while a recorded run is advanced."""
    attributes: telemetry.Attributes = {
        "sqlgate.run_id": ctx.run_id,
        "sqlgate.questions": len(ctx.questions),
        "sqlgate.resumed": resumed is not None,
    }
    with telemetry.span("sqlgate.run", attributes) as run_span:
        if ctx.stored is None or record is None:
            results = advance(p, record, ctx, resumed=resumed)
        else:
            with Lease(record.store, ctx.run_id, record.owner, lease_s=record.lease_s) as lease:
                ctx.lease = lease
                results = advance(p, record, ctx, resumed=resumed)
        telemetry.run_ended(run_span, [RunStatus(r.status).value for r in results])
        return results


def advance(
    p: StageContext, record: RunRecord | None, ctx: RunContext, *, resumed: Resumed
) -> list[RunResult]:
    """The stages in order, from where ``resumed`` says; pause or finish."""
    try:
        if resumed is None:
            asked = [q for q in ctx.active() if not q.agent_sql]  # the caller's SQL: as is
            with telemetry.stage("reasoning"):
                stages.reason(p, ctx, asked)
            ctx.emit()
            with telemetry.stage("exploration"):
                stages.explore(p, ctx, [q for q in asked if q.active])
            with telemetry.stage("generation"):
                stages.generate(
                    p, ctx, [q for q in asked if q.active and q.after_synthesis is None]
                )
            ctx.emit()
        if resumed != "executed":
            with telemetry.stage("approval", expected=(PausedAtGate,)):
                stages.approve_and_execute(p, ctx, resumed=resumed)
            ctx.emit()
            if record is not None:
                record.executed(ctx)
        with telemetry.stage("synthesis"):
            stages.synthesize(p, ctx, [q for q in ctx.active() if q.after_synthesis is not None])
    except PausedAtGate as pause:
        assert record is not None  # only a recorded run pauses at the gate
        record.paused(ctx, pause)
        return ctx.results()
    except RunConflict as lost:  # LeaseLost, or a checkpoint write refused for the same
        # reason: another process took the run over; what the state database holds is the truth.
        assert record is not None
        return record.after_lost_lease(ctx, lost)
    except RateLimitError as exc:  # exceeded, or a shared backend down: never unlimited
        retry_after = getattr(exc, "retry_after", None)
        _end(
            ctx,
            RunStatus.RATE_LIMITED,
            RunError(code=exc.code, message=str(exc), retry_after=retry_after),
        )
    except ApprovalCancelled as exc:
        why = str(exc).strip().rstrip(".")
        message = (
            f"the approval was cancelled ({why}); nothing ran"
            if why
            else ("the approval was cancelled; nothing ran")
        )
        _end(ctx, RunStatus.CANCELLED, RunError(code="approval_cancelled", message=message))
    except (DatabaseError, SchemaInspectionError) as exc:
        _end(ctx, RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
    except LLMError as exc:  # ends_run: the endpoint is down or refuses us; stop at once
        for q in ctx.questions:
            if q.active:
                q.fail_call(exc)
    results = ctx.results()
    if record is not None:
        record.finished(ctx, results)
    return results


def _end(ctx: RunContext, status: RunStatus, error: RunError) -> None:
    for q in ctx.questions:
        q.finish(status, error.model_copy())
