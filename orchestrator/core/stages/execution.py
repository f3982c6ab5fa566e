"""SQLExecutor and ResultValidator: run what was approved, in parallel, at most once each."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, NamedTuple

from agents import ExecutionError, ExecutionResult, ResultValidator
from agents.response_synthesizer import PREVIEW_ROWS
from approvals import AlreadyExecuted, ApprovalGate, ApprovalOutcome, ExecutionInDoubt
from orchestrator.core import telemetry
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunError, RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import StageContext

if TYPE_CHECKING:
    from agents import SQLExecutor
    from safety import SqlValidator, ValidatedStatement

__all__ = ["Runnable", "execute", "validated"]


class Runnable(NamedTuple):
    """An approved statement: its question, the outcome that approved it and its call_id."""

    q: QuestionState
    outcome: ApprovalOutcome
    call_id: str


class _Ran(NamedTuple):
    q: QuestionState
    result: ExecutionResult | None
    error: ExecutionError | None
    started: float


def execute(
    p: StageContext,
    ctx: RunContext,
    runnable: list[Runnable],
    executor: SQLExecutor,
    gate: ApprovalGate,
    validator: SqlValidator,
    checked: Mapping[str, ValidatedStatement | None] | None = None,
) -> None:
    """Run each approved statement once, and check its result.

    What runs is a ``safety.ValidatedStatement``: the approved text, byte for byte, validated
    again by the run's ``validator`` just before it runs (a text that no longer renders to
    itself, or is refused, ends the question ``unsafe`` and nothing runs), unless ``checked``
    holds this cycle's own statement for the call with exactly that text (validated once). The
    executor keeps at most ``min(row_cap, validator.row_limit)`` rows (see ``SQLExecutor.run``)."""
    if not runnable:
        return
    if ctx.lease is not None:
        ctx.lease.check()  # a process that lost the run never executes its statements
    ctx.progress("running SQL", 0, len(runnable))
    finished = [0]

    def run_one(entry: Runnable) -> _Ran:
        q, outcome, call_id = entry
        attributes: telemetry.Attributes = {
            "db.system.name": p.db.dialect,
            "sqlgate.question_id": q.qid,
            "sqlgate.call_id": call_id,
        }
        with telemetry.span("sqlgate.execute", attributes) as span:
            ran = _run_one(q, outcome, call_id)
            if ran.result is not None:
                span.set_attribute("sqlgate.rows", ran.result.row_count)
            elif ran.error is not None:
                span.set_attribute("error.type", ran.error.code)
            return ran

    def _run_one(q: QuestionState, outcome: ApprovalOutcome, call_id: str) -> _Ran:
        started = p.clock()
        try:
            with gate.ledger.executing(outcome, call_id) as claim:
                sql = q.sql = claim.sql  # byte-for-byte what was approved (or edited)
                statement = (checked or {}).get(call_id)
                if statement is None or statement.sql != sql:
                    statement = validated(validator, sql)
                claim.sent()  # durably, before the database sees it: a crash now is in doubt
                return _Ran(q, executor.run(statement), None, started)
        except ExecutionError as exc:
            return _Ran(q, None, exc, started)
        except (AlreadyExecuted, ExecutionInDoubt) as exc:
            return _Ran(q, None, ExecutionError("execution_in_doubt", str(exc)), started)
        finally:
            finished[0] += 1
            ctx.progress("running SQL", finished[0], len(runnable))

    if len(runnable) == 1:
        done = [run_one(runnable[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(p.config.parallelism, len(runnable))) as pool:
            done = list(pool.map(telemetry.in_context(run_one), runnable))

    if p.hooks.after_execution is not None:
        p.hooks.after_execution(
            p,
            ctx,
            [
                (entry.q, entry.outcome, entry.call_id)
                for entry, ran in zip(runnable, done, strict=True)
                if ran.result is not None
            ],
            gate,
        )
    for q, result, exc, started in done:
        if result is not None:
            cut = ""
            if result.truncated:
                cut = (
                    f" (truncated: past the {result.byte_cap}-byte result budget)"
                    if result.cut_by == "bytes"
                    else f" (truncated: more than {result.row_cap})"
                )
            q.note(
                "SQLExecutor",
                q.sql or "",
                f"{result.row_count} row(s){cut}",
                started=started,
            )
            q.result = result
            _check_result(p, q, result)
            continue
        assert exc is not None
        q.note("SQLExecutor", q.sql or "", f"{exc.code}: {exc.message}", started=started, ok=False)
        if exc.code == "not_validated":
            q.finish(RunStatus.UNSAFE, RunError(code=exc.code, message=exc.message))
        elif exc.code == "database_unreachable":
            q.finish(RunStatus.DATABASE_ERROR, RunError(code=exc.code, message=exc.message))
        elif exc.code == "execution_in_doubt":  # never re-run what may have run
            q.finish(RunStatus.EXECUTION_IN_DOUBT, RunError(code=exc.code, message=exc.message))
        elif exc.timed_out:
            q.failure = f"statement timeout: {exc.message}"
            q.after_synthesis = RunStatus.TIMED_OUT
            q.error = RunError(code=exc.code, message=exc.message)
        elif q.corrections < p.config.max_corrections and not q.agent_sql:
            q.correction_error = exc.message
        else:
            q.failure = exc.message
            q.after_synthesis = RunStatus.EXECUTION_FAILED
            q.error = RunError(code=exc.code, message=exc.message)


def validated(validator: SqlValidator, sql: str) -> ValidatedStatement:
    """``sql`` as a statement ``validator`` accepts exactly as written (approved SQL is the
    validator's own rendering, so it renders to itself); ``ExecutionError("not_validated")``
    otherwise, before anything runs."""
    result = validator.validate(sql)
    statement = result.statement
    if statement is None or statement.sql != sql:
        refusal = result.refusal
        why = f"{refusal.code}: {refusal.message}" if refusal else "it renders differently"
        raise ExecutionError(
            "not_validated",
            f"The approved statement does not pass the validator as written ({why}); nothing was run.",
        )
    return statement


def _check_result(p: StageContext, q: QuestionState, result: ExecutionResult) -> None:
    started = p.clock()
    q.warnings += ResultValidator().check(result)
    if p.result_rows is not None:  # every kept row, for `ask --out` and GET /runs/{id}/rows
        p.result_rows.save(
            q.run_id,
            q.qid,
            result.columns,
            result.rows,
            truncated=result.truncated,
            row_cap=result.row_cap,
        )
    # Keep what the answer and the result object use, not every fetched row.
    result.rows = result.rows[: max(p.config.preview_rows, PREVIEW_ROWS)]
    q.note(
        "ResultValidator",
        f"{result.row_count} row(s)",
        "; ".join(q.warnings) or "no warnings",
        started=started,
    )
    q.after_synthesis = RunStatus.ANSWERED
