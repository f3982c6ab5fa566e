"""Approval cycles: validate every statement waiting, ONE review, run what was approved, correct.

A cycle is: SafetyValidator on each statement -> ONE batched decision (a reviewer here, or a
pause at the gate until one arrives through the store) -> execution in parallel -> Batch 3 for
the statements that failed, whose fixes wait for the next cycle. At most ``max_corrections``
corrections per question, so at most three cycles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from approvals import (
    ApprovalCancelled,
    ApprovalGate,
    ApprovalItem,
    ApprovalOutcome,
    AuthorMayNotDecide,
    DecisionError,
)
from orchestrator.core import telemetry
from orchestrator.core.checkpoint import PendingCheckpoint
from orchestrator.core.question import PausedAtGate, PendingStatement, QuestionState
from orchestrator.core.result import ApprovalRecord, RunError, RunStatus
from orchestrator.core.run_context import RunContext
from orchestrator.core.stage_context import StageContext
from orchestrator.core.stages.correction import correct
from orchestrator.core.stages.execution import Runnable, execute
from safety import CORRECTABLE_CODES, SqlValidator, ValidationResult

if TYPE_CHECKING:
    from agents import SQLExecutor

__all__ = ["CORRECTABLE_REFUSALS", "approve_and_execute", "resume_cycle"]

#: Validator refusals a model can fix by rewriting: every code ``safety/codes.py`` registers as
#: naming something unknown or not allowed, or as a form a rewrite avoids. The others (writes,
#: commands, files, catalogs) are attacks and are not retried.
CORRECTABLE_REFUSALS = CORRECTABLE_CODES
#: Findings written into one correction request at most (a statement naming twenty unknown
#: columns needs the first few to be rewritten, not a page of them).
_FINDINGS_TOLD = 5


def approve_and_execute(
    p: StageContext,
    ctx: RunContext,
    *,
    resumed: tuple[int, dict[str, PendingStatement], ApprovalOutcome] | None = None,
) -> None:
    """Run approval cycles until no question has SQL waiting (or the run pauses at the gate).

    ``resumed``: (cycle, pending statements, outcome) of a cycle decided while the run was
    paused; it is finished first, then the cycles go on.
    """
    policy = p.run_policy(ctx)
    validator = p.validator(policy, ctx.identity)
    gate = p.gate(ctx.run_id, validator, policy, database=ctx.database, identity=ctx.identity)
    executor = p.executor(policy)
    cycle = 0
    if resumed is not None:
        cycle, pending, outcome = resumed
        if telemetry.enabled() and outcome.decided_at is not None:
            opened = gate.store.get_batch(outcome.batch_id).batch.created_at
            telemetry.waited_at_gate(outcome.batch_id, opened, outcome.decided_at, outcome.status)
        # A stopped process's claims: those it sent are in doubt, the others are released.
        gate.ledger.recover(run_id=ctx.run_id)
        _after_review(
            p,
            ctx,
            pending,
            outcome,
            cycle,
            executor,
            gate,
            validator,
            revalidate=ctx.schema_changed,
        )
    while True:
        waiting = [q for q in ctx.questions if q.active and q.pending_sql is not None]
        if not waiting:
            return
        cycle += 1
        pending = _validate_all(p, waiting, validator, cycle)
        outcome = _decide(p, ctx, pending, gate, cycle)
        _after_review(p, ctx, pending, outcome, cycle, executor, gate, validator)


def _after_review(
    p: StageContext,
    ctx: RunContext,
    pending: dict[str, PendingStatement],
    outcome: ApprovalOutcome,
    cycle: int,
    executor: SQLExecutor,
    gate: ApprovalGate,
    validator: SqlValidator,
    *,
    revalidate: bool = False,
) -> None:
    runnable = _apply(p, pending, outcome, cycle)
    if revalidate:
        runnable = _still_valid(runnable, validator)
    # This cycle's statements as the validator minted them: run without validating them again
    # when the approved text is theirs byte for byte (an edit or a changed text is validated).
    checked = {
        call_id: entry.validation.statement if entry.validation is not None else None
        for call_id, entry in pending.items()
    }
    execute(p, ctx, runnable, executor, gate, validator, checked)
    if p.hooks.after_rejection is not None:
        p.hooks.after_rejection(p, ctx, pending, outcome, gate)
    needing = [q for q in ctx.questions if q.active and q.correction_error is not None]
    if needing:
        correct(p, ctx, needing)


def _validate_all(
    p: StageContext, qs: list[QuestionState], validator: SqlValidator, cycle: int
) -> dict[str, PendingStatement]:
    pending: dict[str, PendingStatement] = {}
    for q in qs:
        sql, q.pending_sql = q.pending_sql or "", None
        started = p.clock()
        with telemetry.span(
            "sqlgate.validate", {"sqlgate.question_id": q.qid, "sqlgate.cycle": cycle}
        ) as span:
            validation = validator.validate(sql)
            span.set_attribute("sqlgate.validation.ok", validation.ok)
        refusal = validation.refusal
        q.note(
            "SafetyValidator",
            sql,
            "accepted" + _rewrites(validation)
            if validation.ok
            else f"refused: {refusal.code if refusal else '?'}: {refusal.message if refusal else ''}",
            started=started,
            ok=validation.ok,
        )
        q.sql = validation.sql if validation.ok else sql
        item = ApprovalItem.new(
            question_id=f"{q.run_id}:{q.qid}",
            question=q.text,
            sql=q.sql or sql,
            findings=list(validation.findings),
            refused=not validation.ok,
            cycle=cycle,
        )
        code, message = _verdict(validation)
        pending[item.call_id] = PendingStatement(q, item, validation.ok, code, message, validation)
    return pending


def _verdict(validation: ValidationResult) -> tuple[str | None, str | None]:
    """The refusal that decides what happens next, and what the model is told.

    One refusal a rewrite cannot fix (a write, a file) decides alone. When every refusal is
    correctable, the first one's code stands and the message carries each finding, so one
    correction can fix them all.
    """
    errors = validation.errors
    if not errors:
        return None, None
    final = next((f for f in errors if f.code not in CORRECTABLE_REFUSALS), None)
    if final is not None:
        return final.code, final.message
    shown = errors[:_FINDINGS_TOLD]
    more = len(errors) - len(shown)
    message = " ".join(
        [shown[0].message]
        + [f"{f.code}: {f.message}" for f in shown[1:]]
        + ([f"({more} more findings like these.)"] if more else [])
    )
    return errors[0].code, message


def _decide(
    p: StageContext,
    ctx: RunContext,
    pending: dict[str, PendingStatement],
    gate: ApprovalGate,
    cycle: int,
) -> ApprovalOutcome:
    """ONE review of every statement of the cycle; or, with no reviewer here, pause.

    A reviewer here is one vote: statements whose risk needs more reviewers are split off, so
    they do not hold back (or cancel) the others. They wait for the next cycle's batch, stored
    at the gate for more reviewers, or, in a run that cannot wait, end ``cancelled`` saying why.
    """
    if p.reviewer is not None:
        _split_by_risk(p, ctx, pending, gate)
    if p.hooks.before_review is not None:
        _annotate(p, ctx, pending)
    items = [s.item for s in pending.values() if s.item is not None]
    # The safety stage's verdicts go with the items: the gate does not validate them again.
    verdicts = {
        s.item.call_id: s.validation
        for s in pending.values()
        if s.item is not None and s.validation is not None
    }
    ctx.progress("waiting for approval", 0, len(items))
    attributes: telemetry.Attributes = {
        "sqlgate.cycle": cycle,
        "sqlgate.approval.items": len(items),
    }
    with telemetry.span("sqlgate.approval", attributes, expected=(PausedAtGate,)) as span:
        try:
            outcome = _review(p, ctx, items, gate, cycle, pending, verdicts)
        except PausedAtGate as pause:
            span.set_attributes(
                {"sqlgate.approval.batch_id": pause.batch_id, "sqlgate.approval.status": "paused"}
            )
            raise
        span.set_attributes(
            {
                "sqlgate.approval.batch_id": outcome.batch_id,
                "sqlgate.approval.status": str(outcome.status),
            }
        )
        return outcome


def _split_by_risk(
    p: StageContext, ctx: RunContext, pending: dict[str, PendingStatement], gate: ApprovalGate
) -> None:
    """Take out of ``pending`` the statements one vote cannot decide, when others can be.

    Each accepted statement's risk is assessed here (and carried to the gate with it)."""
    if gate.assess is None or gate.quorum > 1:
        return
    needs: dict[str, int] = {}
    for call_id, s in pending.items():
        if s.item is None or not s.ok:
            continue
        risk = gate.assess_item(s.item)
        s.item = s.item.model_copy(update={"risk": risk})
        if risk is not None:
            needs[call_id] = gate.risk_approval.quorum_for(risk.level)
    held = [call_id for call_id, n in needs.items() if n > 1]
    if not held or len(held) == len(pending):
        return  # one batch as before: nothing to split
    stored = _stored(p, ctx)
    for call_id in held:
        s = pending.pop(call_id)
        assert s.item is not None
        if stored:  # the next cycle's batch, which waits at the gate for more reviewers
            s.q.pending_sql = s.item.sql
            continue
        why = (
            f"its risk ({s.item.risk.summary() if s.item.risk else 'high'}) needs "
            f"{needs[call_id]} reviewers and only one was asked; nothing ran"
        )
        s.q.answer = f"sqlgate did not run the SQL: {why}."
        s.q.finish(RunStatus.CANCELLED, RunError(code="approval_cancelled", message=why))


def _annotate(p: StageContext, ctx: RunContext, pending: dict[str, PendingStatement]) -> None:
    """The features' findings on the statements about to be shown (``before_review``), after
    the validator's own."""
    assert p.hooks.before_review is not None
    shown = [s.item for s in pending.values() if s.item is not None and s.ok]
    added = p.hooks.before_review(p, ctx, shown) if shown else {}
    for s in pending.values():
        extra = added.get(s.item.call_id) if s.item is not None else None
        if s.item is not None and extra:
            s.item = s.item.model_copy(update={"findings": [*s.item.findings, *extra]})


def _stored(p: StageContext, ctx: RunContext) -> bool:
    """The run is recorded, so it can wait at the gate for more reviewers."""
    return ctx.stored is not None and p.can_wait


def _review(
    p: StageContext,
    ctx: RunContext,
    items: list[ApprovalItem],
    gate: ApprovalGate,
    cycle: int,
    pending: dict[str, PendingStatement],
    verdicts: dict[str, ValidationResult],
) -> ApprovalOutcome:
    if p.reviewer is None:
        batch = gate.open(items, verdicts)
        if batch.pending:
            raise PausedAtGate(batch.batch_id, cycle, pending)
        return gate.outcome(batch.batch_id)
    try:
        outcome = gate.review(items, verdicts)
    except DecisionError as exc:
        raise ApprovalCancelled(f"the decision was refused: {exc}") from exc
    except AuthorMayNotDecide as exc:  # four_eyes: the asker cannot approve their own question
        if _stored(p, ctx):
            raise PausedAtGate(exc.batch_id, cycle, pending) from exc
        raise ApprovalCancelled(str(exc)) from exc
    if outcome.status == "pending":  # a quorum (e.g. of a high-risk statement) wants more votes
        if _stored(p, ctx):
            raise PausedAtGate(outcome.batch_id, cycle, pending)
        raise ApprovalCancelled(
            f"batch {outcome.batch_id} needs {outcome.quorum} reviewers and only one was asked"
        )
    return outcome


def _apply(
    p: StageContext, pending: dict[str, PendingStatement], outcome: ApprovalOutcome, cycle: int
) -> list[Runnable]:
    runnable: list[Runnable] = []
    for call_id, s in pending.items():
        q = s.q
        resolution = outcome.resolutions[call_id]
        status = str(getattr(resolution.status, "value", resolution.status))
        q.approvals.append(
            ApprovalRecord(
                cycle=cycle,
                batch_id=outcome.batch_id,
                call_id=call_id,
                status=status,
                sql=resolution.sql,
                reason=resolution.reason,
            )
        )
        if not s.ok:
            if (
                s.code in CORRECTABLE_REFUSALS
                and q.corrections < p.config.max_corrections
                and not q.agent_sql  # the caller's SQL is never rewritten by the model
            ):
                q.correction_error = f"{s.code}: {s.message}"
                continue
            whose = "submitted" if q.agent_sql else "generated"
            q.answer = f"sqlgate refused the {whose} SQL ({s.code}): {s.message} Nothing was run."
            q.finish(RunStatus.UNSAFE, RunError(code=s.code or "refused", message=s.message or ""))
        elif status == "rejected":
            reason = resolution.reason or "no reason given"
            if reason.startswith("expired:"):  # the batch's deadline decided, not a person
                q.failure = "nobody decided on it before the approval deadline, so it was not run"
                q.error = RunError(code="approval_expired", message=reason)
            else:
                q.failure = f"a reviewer rejected it: {reason}"
                q.error = RunError(code="rejected_by_reviewer", message=reason)
            q.after_synthesis = RunStatus.REJECTED
        else:
            runnable.append(Runnable(q, outcome, call_id))
    return runnable


def _still_valid(runnable: list[Runnable], validator: SqlValidator) -> list[Runnable]:
    """The approved statements that still pass the validator on the schema as it is now; the
    others end ``unsafe`` (``schema_changed``) and are not run."""
    kept = []
    for entry in runnable:
        resolution = entry.outcome.resolutions[entry.call_id]
        validation = validator.validate(resolution.sql or "")
        if validation.ok:
            kept.append(entry)
            continue
        refusal = validation.refusal
        why = f"{refusal.code}: {refusal.message}" if refusal else "refused"
        message = (
            "the database's schema changed since this statement was approved, and it no longer "
            f"passes the safety validator ({why}); nothing was run"
        )
        entry.q.answer = f"sqlgate did not run the approved SQL: {message}."
        entry.q.finish(RunStatus.UNSAFE, RunError(code="schema_changed", message=message))
    return kept


def _rewrites(validation: ValidationResult) -> str:
    rewrites = [f.code for f in validation.findings if f.severity == "rewrite"]
    return f" (rewrites: {', '.join(rewrites)})" if rewrites else ""


def resume_cycle(
    ctx: RunContext, pending: dict[str, PendingCheckpoint]
) -> dict[str, PendingStatement]:
    """The pending statements of a checkpoint, bound to the run's questions again."""
    by_id = {q.qid: q for q in ctx.questions}
    return {
        call_id: PendingStatement(by_id[s.question_id], None, s.ok, s.code, s.message)
        for call_id, s in pending.items()
    }
