"""``sqlgate approvals ...`` and ``sqlgate resume``: the reviewer's side of a paused run.

    sqlgate ask "..." --db URL --defer        pause at the gate instead of prompting (exit 11)
    sqlgate approvals list                    batches waiting for a decision
    sqlgate approvals show BATCH              each statement: question, highlighted SQL, findings
    sqlgate approvals decide BATCH            decide at the terminal, or --file decisions.json
    sqlgate approvals history                 the audit log
    sqlgate approvals sweep                   apply the expiry action to batches past their deadline
    sqlgate resume RUN_ID                     carry on once the batch is decided

State lives in ``SQLGATE_STATE_URL`` (a SQLAlchemy URL, e.g. PostgreSQL shared by several hosts),
by default a SQLite file in the state folder. The reviewer's identity is the login name, or the
actor of a reviewer token in ``SQLGATE_REVIEWER_TOKEN`` (``orchestrator.interfaces.reviewer_identity``),
never the decision file nor ``SQLGATE_REVIEWER`` alone.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from approvals.terminal_text import terminal_console
from orchestrator.core.errors import ConfigurationError, SqlgateError
from orchestrator.interfaces.cli.common import (
    JsonOpt,
    Spinner,
    TraceOpt,
    dump_result,
    emit_json,
    err,
    fail,
    fail_with,
    open_target,
    show_result,
)

if TYPE_CHECKING:
    from approvals import SqlApprovalStore
    from orchestrator.core.runs import RunStore

approvals_app = typer.Typer(
    help="Review SQL waiting at the approval gate: list, show, decide, history.",
    no_args_is_help=True,
    add_completion=False,
)


def state_url() -> str:
    from orchestrator.core.state_db import default_state_url

    return default_state_url()


def stores() -> tuple[SqlApprovalStore, RunStore]:
    """The approvals store and the run store, both in the state database."""
    from orchestrator.core.state_db import state_errors
    from orchestrator.wiring import state_database

    state = state_database(state_url())
    with state_errors(state.safe_url):
        state.approvals.setup()
        state.runs.setup()
    return state.approvals, state.runs


def gate_for(record: Any, approvals: Any, runs: Any, db: str | None = None) -> Any:
    """A gate that validates edits as the batch's own run would: in its dialect, under the
    policy the batch was created under, and (with ``db``, the run's database) against the real
    schema. Without ``db`` nothing can be resolved against a schema, so the check fails closed:
    ``SELECT *`` and, under table or column rules, anything unresolvable is refused."""
    from approvals import ApprovalGate
    from orchestrator.core.database import (
        TargetDatabase,
        policy_of,
        redact_url,
        validator_without_database,
    )
    from orchestrator.core.run_identity import database_identity
    from orchestrator.features.risk import assessor_for, risk_approval, risk_without_database
    from orchestrator.interfaces.reviewer_identity import cli_reviewer
    from safety import Policy

    context = dict(record.batch.context)
    stored_url: str | None = None
    try:
        stored = runs.load(record.batch.run_id)
        stored_url = stored.database
        context.setdefault("dialect", getattr(stored.checkpoint, "dialect", None))
    except SqlgateError:
        pass
    policy = policy_of(context, Policy())
    if db:
        if stored_url and database_identity(db) != database_identity(stored_url):
            raise ConfigurationError(
                f"--db is {redact_url(db)}, but the batch's run asked {stored_url}: "
                "edits are checked against the run's own database"
            )
        database = TargetDatabase(db)
        validate = database.validator_for(context).validate
        assess = assessor_for(database, policy)
    else:
        validate = validator_without_database(context, Policy()).validate
        assess = risk_without_database(context, policy)
    return ApprovalGate(
        reviewer=None,
        validate=validate,
        store=approvals,
        run_id=record.batch.run_id,
        actor=cli_reviewer(),
        # an edit is assessed again; one that needs more reviewers re-opens the batch
        assess=assess,
        risk_approval=risk_approval(policy),
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
            "risk": b.risk,
        }
        for b in summaries
    ]
    if as_json:
        emit_json(rows)
        return
    from orchestrator.features.render import rows_table

    if not rows:
        terminal_console().print("No batches are waiting for a decision.")
        return
    terminal_console().print(
        rows_table(
            ["batch", "run", "cycle", "status", "pending", "risk", "created"],
            [
                [
                    r["batch_id"],
                    r["run_id"],
                    r["cycle"],
                    r["status"],
                    r["pending"],
                    r["risk"] or "-",
                    r["created_at"],
                ]
                for r in rows
            ],
        )
    )


@approvals_app.command()
def show(
    batch_id: Annotated[str, typer.Argument(help="The batch id (from `approvals list`).")],
    as_json: JsonOpt = False,
) -> None:
    """Every statement of a batch: the question, the highlighted SQL and the validator's findings,
    and the database login its SQL runs as."""
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
    console = terminal_console()
    TerminalReviewer(console=console).show(record.batch)
    console.print(f"status: [bold]{record.status}[/]")
    login = record.batch.context.get("login")
    if login is not None:  # the database login (and role) the approved SQL will run as
        console.print(f"runs as: [bold]{escape(str(login))}[/]")


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
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            envvar="SQLGATE_DB",
            help="The run's database (read-only): edits are then checked against its real schema, "
            "as the run checks them. Without it, an edit using SELECT * (or, under column "
            "rules, anything not resolvable without the schema) is refused. Env: SQLGATE_DB.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Decide a batch: approve, reject with a reason, or edit each pending statement.

    Edits are validated under the policy the batch was created under (recorded with it).

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
    from approvals.decisions import MAX_DECISION_FILE_BYTES

    approvals, runs = stores()
    try:
        record = approvals.get_batch(batch_id)
    except BatchNotFound:
        fail(f"no batch {batch_id!r}", error_code="batch_not_found", as_json=as_json)
        return
    try:
        gate = gate_for(record, approvals, runs, db)
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        return
    if file is not None:
        try:
            with file.open("rb") as handle:  # one byte over the cap is enough to refuse
                decisions = parse_decision_file(handle.read(MAX_DECISION_FILE_BYTES + 1))
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
            batch_id, decisions, actor=gate.actor, idempotency_key=idempotency_key
        )
    except ApprovalError as exc:
        code = getattr(exc, "code", "decision_refused")
        fail(str(exc), 1, error_code=code, as_json=as_json)
        return
    except ValueError as exc:  # a decision that is none of approve / reject / edit
        fail(f"invalid decision: {exc}", 1, error_code="invalid_decision", as_json=as_json)
        return
    from orchestrator.interfaces.tasks import broker_url, enqueue

    queued = False
    if str(outcome.status) != "pending" and broker_url():
        enqueue(record.batch.run_id)  # a worker carries the run on (sqlgate worker)
        queued = True
    payload = {
        "batch_id": batch_id,
        "run_id": record.batch.run_id,
        "status": str(outcome.status),
        "resolutions": {cid: r.model_dump(mode="json") for cid, r in outcome.resolutions.items()},
        "votes": outcome.votes,
        "quorum": outcome.quorum,
        "next": "a worker resumes the run" if queued else f"sqlgate resume {record.batch.run_id}",
    }
    if str(outcome.status) == "pending":
        # e.g. an edit raised the risk: the batch waits for more reviewers, nothing runs yet
        payload["next"] = (
            f"{outcome.quorum - outcome.votes} more reviewer(s) must decide "
            f"(`sqlgate approvals show {batch_id}`)"
        )
    if as_json:
        emit_json(payload)
    else:
        votes = f" ({outcome.votes} of {outcome.quorum} reviewers)" if outcome.quorum > 1 else ""
        terminal_console().print(
            f"Batch {escape(batch_id)}: [bold]{payload['status']}[/]{votes}. "
            f"Next: [cyan]{escape(str(payload['next']))}[/]"
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
    from orchestrator.features.render import rows_table

    terminal_console().print(
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
    terminal_console().print(
        f"{len(rows)} batch(es) expired."
        + "".join(f"\n  {r['batch_id']} (run {r['run_id']})" for r in rows)
    )


def resume(
    run_id: Annotated[str, typer.Argument(help="The run id printed when the run paused.")],
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The database URL, when the stored one had a password (it is never stored). "
            "It must be the run's own database: another one stops with exit 14, nothing run.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    trace: TraceOpt = False,
) -> None:
    """Carry on with a run paused at the approval gate, once its batch is decided.

    Any process sharing the state database may resume; exactly one wins. Approved SQL runs at most
    once, even if an earlier worker died mid-run (such a statement is reported in doubt).
    """
    from orchestrator.core.errors import RunNotFound, WrongDatabase
    from orchestrator.core.result import WRONG_DATABASE_EXIT
    from orchestrator.core.run_identity import check_run_database, database_identity

    approval_store, run_store = stores()
    try:
        stored = run_store.load(run_id)
    except RunNotFound as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    stored_db = stored.database
    try:  # before the database is even opened: --db must be the run's own database
        check_run_database(run_id, stored.target, database_identity(db or stored_db))
    except WrongDatabase as exc:
        fail(exc.message, WRONG_DATABASE_EXIT, as_json=as_json, error_code=exc.code)
    except Exception:  # a malformed --db: opening it says so (exit 2)
        pass
    if db is None and "***" in stored_db:
        fail(
            "the run's database URL had a password, which sqlgate never stores: pass --db URL",
            as_json=as_json,
            error_code="config_error",
        )
    database, pipeline = paused_run_pipeline(db or stored_db, approval_store, run_store, as_json)
    try:
        with Spinner(enabled=not as_json) as spinner:
            pipeline.progress = spinner
            results = pipeline.resume(run_id)
    except SqlgateError as exc:
        status = WRONG_DATABASE_EXIT if isinstance(exc, WrongDatabase) else 1
        fail(exc.message, status, as_json=as_json, error_code=exc.code)
        return
    finally:
        database.dispose()
    if as_json and len(results) == 1:
        emit_json(dump_result(results[0]))
    elif as_json:
        emit_json([dump_result(r) for r in results])
    else:
        for result in results:
            show_result(result, as_json=False, trace=trace)
    raise typer.Exit(max(r.exit_code for r in results))


def paused_run_pipeline(
    url: str, approval_store: Any, run_store: Any, as_json: bool
) -> tuple[Any, Any]:
    """The database and a pipeline that carries on recorded runs (``resume``, ``runs recover``):
    no reviewer (it pauses at the gate), the state database's stores, waiting for the limiter."""
    from orchestrator.core.lease import lease_from_env
    from orchestrator.core.pipeline import Pipeline, PipelineConfig
    from orchestrator.features.memory import memory_for
    from orchestrator.wiring import run_hooks

    try:
        config = PipelineConfig(lease_s=lease_from_env())
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
    database, llm = open_target(
        db=url,
        model=None,
        base_url=None,
        rate_limit=None,
        wait=True,
        timeout=None,
        as_json=as_json,
    )
    pipeline = Pipeline(
        database,
        llm,
        None,
        config=config,
        approval_store=approval_store,
        run_store=run_store,
        hooks=run_hooks(memory_for(None, database)),
    )
    return database, pipeline


def _identity() -> str:
    from approvals import reviewer_identity

    return reviewer_identity()
