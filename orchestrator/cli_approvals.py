"""``sqlgate approvals ...`` and ``sqlgate resume``: the reviewer's side of a paused run.

    sqlgate ask "..." --db URL --defer        pause at the gate instead of prompting (exit 11)
    sqlgate approvals list                    batches waiting for a decision
    sqlgate approvals show BATCH              each statement: question, highlighted SQL, findings
    sqlgate approvals decide BATCH            decide at the terminal, or --file decisions.json
    sqlgate approvals history                 the audit log
    sqlgate approvals sweep                   apply the expiry action to batches past their deadline
    sqlgate resume RUN_ID                     carry on once the batch is decided

State lives in ``SQLGATE_STATE_URL`` (a SQLAlchemy URL, e.g. PostgreSQL shared by several hosts),
by default a SQLite file in the state folder. The reviewer's identity comes from
``SQLGATE_REVIEWER`` (else the login name), never from the decision file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from approvals import SqlApprovalStore, reviewer_identity
from orchestrator.cli_common import emit_json, err, fail
from orchestrator.errors import SqlgateError
from orchestrator.runs import RunStore

approvals_app = typer.Typer(
    help="Review SQL waiting at the approval gate: list, show, decide, history.",
    no_args_is_help=True,
    add_completion=False,
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON to stdout.")]


def state_url() -> str:
    from orchestrator.state_db import default_state_url

    return default_state_url()


def stores() -> tuple[SqlApprovalStore, RunStore]:
    """The approvals store and the run store, both in the state database."""
    from orchestrator.state_db import StateDatabase

    state = StateDatabase(state_url())
    state.approvals.setup()
    state.runs.setup()
    return state.approvals, state.runs


def gate_for(record: Any, approvals: Any, runs: Any) -> Any:
    """A gate able to validate edits in the dialect of the batch's database."""
    from approvals import ApprovalGate
    from safety import SafetyPolicy, SqlValidator

    dialect = record.batch.context.get("dialect")
    if dialect is None:
        try:
            checkpoint = runs.load(record.batch.run_id).checkpoint
            dialect = getattr(checkpoint, "dialect", "sqlite")
        except SqlgateError:
            dialect = "sqlite"
    validator = SqlValidator(dialect=dialect, policy=SafetyPolicy())
    return ApprovalGate(
        reviewer=None,
        validate=validator.validate,
        store=approvals,
        run_id=record.batch.run_id,
        actor=reviewer_identity(),
    )


@approvals_app.command("list")
def list_batches(
    all_: Annotated[bool, typer.Option("--all", help="Also decided and expired batches.")] = False,
    limit: Annotated[int, typer.Option(help="At most this many batches.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Batches waiting for a decision (with --all: every batch), oldest first."""
    approvals, _ = stores()
    summaries = approvals.list_summaries(status=None if all_ else "pending", limit=limit)
    rows = [
        {
            "batch_id": b.batch_id,
            "run_id": b.run_id,
            "cycle": b.cycle,
            "status": b.status,
            "pending": b.pending,
            "created_at": b.created_at.isoformat(),
            "deadline": b.deadline.isoformat() if b.deadline else None,
        }
        for b in summaries
    ]
    if as_json:
        emit_json(rows)
        return
    from orchestrator.render import rows_table

    if not rows:
        Console().print("No batches are waiting for a decision.")
        return
    Console().print(
        rows_table(
            ["batch", "run", "cycle", "status", "pending", "created"],
            [
                [r["batch_id"], r["run_id"], r["cycle"], r["status"], r["pending"], r["created_at"]]
                for r in rows
            ],
        )
    )


@approvals_app.command()
def show(
    batch_id: Annotated[str, typer.Argument(help="The batch id (from `approvals list`).")],
    as_json: JsonOpt = False,
) -> None:
    """Every statement of a batch: the question, the highlighted SQL and the validator's findings."""
    from approvals import BatchNotFound, TerminalReviewer

    approvals, _ = stores()
    try:
        record = approvals.get_batch(batch_id)
    except BatchNotFound:
        fail(f"no batch {batch_id!r}", error_code="batch_not_found", as_json=as_json)
        return
    if as_json:
        emit_json(record.model_dump(mode="json"))
        return
    console = Console()
    TerminalReviewer(console=console).show(record.batch)
    console.print(f"status: [bold]{record.status}[/]")


@approvals_app.command()
def decide(
    batch_id: Annotated[str, typer.Argument(help="The batch id (from `approvals list`).")],
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            help='Decisions as JSON: {"CALL_ID": "approve" | {"action": "reject", "reason": "..."} | '
            '{"action": "edit", "sql": "..."}}, covering exactly the pending statements.',
        ),
    ] = None,
    idempotency_key: Annotated[
        str | None, typer.Option(help="Repeat-safe key: the same decision twice is one.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Decide a batch: approve, reject with a reason, or edit each pending statement.

    Exactly one decision wins a batch; a different later one gets a conflict. Then run
    `sqlgate resume RUN_ID` (any machine sharing the state database) to carry on.
    """
    from approvals import (
        ApprovalError,
        BatchNotFound,
        DecisionError,
        TerminalReviewer,
        parse_decision_file,
    )

    approvals, runs = stores()
    try:
        record = approvals.get_batch(batch_id)
    except BatchNotFound:
        fail(f"no batch {batch_id!r}", error_code="batch_not_found", as_json=as_json)
        return
    gate = gate_for(record, approvals, runs)
    if file is not None:
        try:
            decisions = parse_decision_file(file.read_bytes())
        except OSError as exc:
            fail(
                f"cannot read decisions from {file}: {exc}",
                error_code="invalid_decision_file",
                as_json=as_json,
            )
            return
        except DecisionError as exc:  # not JSON, not an object, or a key twice
            status = 2 if exc.code == "invalid_decision_file" else 1
            fail(f"{file}: {exc}", status, error_code=exc.code, as_json=as_json)
            return
    else:
        if not sys.stdin.isatty():
            fail(
                "no terminal to decide on: pass --file decisions.json",
                error_code="no_reviewer",
                as_json=as_json,
            )
        try:
            decisions = TerminalReviewer(console=err, validate=gate.validate)(record.batch)
        except ApprovalError as exc:
            fail(str(exc), 130, error_code="approval_cancelled", as_json=as_json)
            return
    try:
        outcome = gate.submit(
            batch_id, decisions, actor=reviewer_identity(), idempotency_key=idempotency_key
        )
    except ApprovalError as exc:
        code = getattr(exc, "code", "decision_refused")
        fail(str(exc), 1, error_code=code, as_json=as_json)
        return
    except ValueError as exc:  # a decision that is none of approve / reject / edit
        fail(f"invalid decision: {exc}", 1, error_code="invalid_decision", as_json=as_json)
        return
    from orchestrator.tasks import broker_url, enqueue

    queued = False
    if str(outcome.status) != "pending" and broker_url():
        enqueue(record.batch.run_id)  # a worker carries the run on (sqlgate worker)
        queued = True
    payload = {
        "batch_id": batch_id,
        "run_id": record.batch.run_id,
        "status": str(outcome.status),
        "resolutions": {cid: r.model_dump(mode="json") for cid, r in outcome.resolutions.items()},
        "next": "a worker resumes the run" if queued else f"sqlgate resume {record.batch.run_id}",
    }
    if as_json:
        emit_json(payload)
    else:
        Console().print(
            f"Batch {batch_id}: [bold]{payload['status']}[/]. Next: [cyan]{payload['next']}[/]"
        )


@approvals_app.command()
def history(
    batch: Annotated[str | None, typer.Option(help="Only this batch.")] = None,
    run: Annotated[str | None, typer.Option(help="Only this run.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The append-only audit log: every state change, with who made it."""
    approvals, _ = stores()
    events = approvals.audit_log(batch_id=batch, run_id=run)
    if as_json:
        emit_json([e.model_dump(mode="json") for e in events])
        return
    from orchestrator.render import rows_table

    Console().print(
        rows_table(
            ["seq", "at", "event", "actor", "batch", "call"],
            [
                [
                    e.seq,
                    e.at.isoformat(timespec="seconds"),
                    e.event,
                    e.actor,
                    e.batch_id,
                    e.call_id or "-",
                ]
                for e in events
            ],
        )
    )


@approvals_app.command()
def sweep(as_json: JsonOpt = False) -> None:
    """Apply each overdue batch's expiry action (default: reject all). Safe to run from cron, anywhere.

    Each batch is expired at most once, through the same conditional update as a decision: a
    decision that arrived first wins, and a later one gets an "expired" error.
    """
    from approvals import ExpirySweeper

    approvals, _ = stores()
    outcomes = ExpirySweeper(approvals).sweep()
    rows = [{"batch_id": o.batch_id, "run_id": o.run_id, "status": str(o.status)} for o in outcomes]
    if as_json:
        emit_json(rows)
        return
    Console().print(
        f"{len(rows)} batch(es) expired."
        + "".join(f"\n  {r['batch_id']} (run {r['run_id']})" for r in rows)
    )
