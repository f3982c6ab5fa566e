"""``sqlgate runs``: the runs in the state database, who advances them, and recovery.

    sqlgate runs list [--status S]      runs, newest change first: status, owner, lease expiry
    sqlgate runs show RUN_ID            one run: its state, lease and checkpoint summary
    sqlgate runs recover [--db URL]     take over every run whose process stopped, send again
                                        queued runs nobody claimed (cron-safe)
    sqlgate runs notifications [--failed]   webhook and e-mail deliveries; dead letters
    sqlgate runs notifications --resend [--id N]   send dead letters again

A process advancing a run holds its lease and renews it; when it stops (kill -9, power loss),
the lease expires and ``runs recover`` (or a running ``sqlgate serve``, on its own) takes the run
over: before the approval gate it starts again, after a decision the statements the stopped process
had sent to the database are reported ``execution_in_doubt`` and never run again, and those it
had claimed but never sent are run, once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from approvals.terminal_text import terminal_console
from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import JsonOpt, emit_json, err, fail, fail_with

runs_app = typer.Typer(
    help="Runs in the state database: list them, show one, recover those whose process stopped.",
    no_args_is_help=True,
    add_completion=False,
)


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    left = (moment - datetime.now(UTC)).total_seconds()
    return f"{moment:%Y-%m-%d %H:%M:%S} ({'in ' if left >= 0 else ''}{abs(left):.0f} s{'' if left >= 0 else ' ago'})"


def _row(entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": entry["run_id"],
        "status": entry["status"],
        "owner": entry["owner"],
        "lease_expires_at": entry["lease_expires_at"].isoformat()
        if entry["lease_expires_at"]
        else None,
        "takeovers": entry["takeovers"],
        "updated_at": entry["updated_at"].isoformat(),
        "database": entry["database"],
        "follow_up_of": entry["follow_up_of"],
    }


@runs_app.command("list")
def list_runs(
    status: Annotated[
        str | None,
        typer.Option(help="Only runs in this state (queued, running, awaiting_approval, ...)."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many runs at most.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Runs, newest change first, with the process holding each and until when."""
    from orchestrator.interfaces.cli.approvals import stores

    try:
        _, run_store = stores()
        entries = run_store.list(status=status, limit=limit)
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        return
    if as_json:
        emit_json([_row(e) for e in entries])
        return
    if not entries:
        terminal_console().print(
            "No runs in the state database" + (f" with status {status}." if status else ".")
        )
        return
    table = Table("run", "status", "owner", "lease expires", "takeovers", "updated")
    for e in entries:
        table.add_row(  # as text, never markup
            Text(e["run_id"]),
            e["status"],
            Text(e["owner"] or "-"),
            _when(e["lease_expires_at"]),
            str(e["takeovers"]),
            f"{e['updated_at']:%Y-%m-%d %H:%M:%S}",
        )
    terminal_console().print(table)


@runs_app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    as_json: JsonOpt = False,
) -> None:
    """One run: its state, the process holding it, and where it stands."""
    from orchestrator.interfaces.cli.approvals import stores

    try:
        _, run_store = stores()
        stored = run_store.load(run_id)
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        return
    checkpoint = stored.checkpoint
    summary: dict[str, Any] = {
        "run_id": stored.run_id,
        "status": stored.status,
        "version": stored.version,
        "owner": stored.owner,
        "lease_expires_at": stored.lease_expires_at.isoformat()
        if stored.lease_expires_at
        else None,
        "lease_expired": stored.lease_expired(),
        "takeovers": stored.takeovers,
        "updated_at": stored.updated_at.isoformat(),
        "database": stored.database,
        "checkpoint": checkpoint.kind,
        "follow_up_of": stored.follow_up_of,
    }
    if checkpoint.kind == "paused":
        summary.update(batch_id=checkpoint.batch_id, cycle=checkpoint.cycle)
    if checkpoint.kind == "finished":
        summary["statuses"] = [r.status.value for r in checkpoint.results]
    hints = _hints(checkpoint)
    if hints:
        summary["hints"] = hints
    if as_json:
        emit_json(summary)
        return
    console = terminal_console()
    for key, value in summary.items():
        console.print(Text.assemble((key, "bold"), f": {value}"))


def _hints(checkpoint: Any) -> list[str]:
    """What the asker added to each question (``--hint``), one per question, as the run's
    checkpoint recorded them; empty when none was given (or a finished run no longer holds them)."""
    if checkpoint.kind == "started":
        hints = list(checkpoint.hints or ())
    elif checkpoint.kind in ("paused", "executed"):
        hints = [question.hint for question in checkpoint.questions]
    else:
        hints = []
    return hints if any(hints) else []


@runs_app.command()
def recover(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="The database URL, when a run's stored one had a password (never stored).",
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many runs at most in one go.")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Take over every run whose process stopped (its lease expired), and carry it on; send
    again every run queued and unclaimed for SQLGATE_REQUEUE_AFTER seconds.

    Safe to run from cron on any number of hosts at once: each run is claimed by exactly one.
    A run stopped before the gate starts again (its LLM calls are made, and charged, again); a
    run stopped while executing approved SQL ends ``execution_in_doubt`` for the statements it
    had sent to the database, which are never run again (one claimed but never sent runs now). A
    queued run goes to the workers when SQLGATE_BROKER_URL is set (a duplicate message is
    harmless), else it runs here. A run that cannot be recovered (a corrupt checkpoint, ...) is
    reported and the others go on; the exit status is then 1.
    """
    from orchestrator.core.database import redact_url
    from orchestrator.core.errors import RunConflict, WrongDatabase
    from orchestrator.core.run_identity import database_identity
    from orchestrator.interfaces.cli.approvals import paused_run_pipeline, stores
    from orchestrator.interfaces.tasks import broker_url, enqueue, requeue_after_s

    approval_store, run_store = stores()
    # With --db, only that database's runs; without, each run on its own stored database.
    try:
        target = database_identity(db) if db else None
    except Exception:  # make_url's own errors
        fail(
            f"{redact_url(db or '')!r} is not a database URL",
            as_json=as_json,
            error_code="invalid_database_url",
        )
        return
    try:
        requeue_s = requeue_after_s()
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
    broker = broker_url()
    recovered: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    pipelines: dict[str, Any] = {}

    def report(run_id: str, message: str) -> None:
        failed.append({"run_id": run_id, "error": message})
        err.print(f"[red]cannot recover {escape(run_id)}[/]: {escape(message)}", highlight=False)

    for run_id in run_store.stopped_ids(limit=limit, queued_for_s=requeue_s, target=target):
        try:
            stored = run_store.load(run_id)
        except SqlgateError as exc:  # a corrupt checkpoint: say so, go on with the others
            report(run_id, exc.message)
            continue
        if stored.status == "queued" and broker:
            try:
                enqueue(run_id, url=broker)
            except Exception as exc:  # kombu/redis/amqp connection errors
                report(run_id, f"the broker did not take it: {exc}")
                continue
            recovered.append(
                {"run_id": run_id, "previous_owner": None, "statuses": ["sent to the workers"]}
            )
            continue
        url = db or stored.database
        if "***" in url:
            err.print(
                f"[yellow]skipped {escape(run_id)}[/]: its database URL had a password: "
                "pass --db URL"
            )
            continue
        try:
            if url not in pipelines:
                _, pipelines[url] = paused_run_pipeline(url, approval_store, run_store, as_json)
            results = pipelines[url].recover(run_id)
        except (RunConflict, WrongDatabase):
            continue  # another process took it first, or its URL is another database here
        except SqlgateError as exc:
            report(run_id, exc.message)
            continue
        recovered.append(
            {
                "run_id": run_id,
                "previous_owner": stored.owner,
                "statuses": [r.status.value for r in results],
            }
        )
    for pipeline in pipelines.values():
        pipeline.db.dispose()
    if as_json:
        emit_json({"recovered": recovered, "failed": failed})
    else:
        if not recovered and not failed:
            terminal_console().print("No stopped runs.")
        for entry in recovered:
            terminal_console().print(
                f"recovered [cyan]{escape(entry['run_id'])}[/] from "
                f"{escape(str(entry['previous_owner'] or 'the queue'))}: "
                f"{', '.join(entry['statuses'])}"
            )
    if failed:
        raise typer.Exit(1)


@runs_app.command()
def notifications(
    failed: Annotated[
        bool,
        typer.Option(
            "--failed", help="Only dead letters: deliveries that failed after every retry."
        ),
    ] = False,
    resend: Annotated[
        bool,
        typer.Option(
            "--resend",
            help="Send the dead letters again (all, or those given by --id) with a fresh retry "
            "schedule: a running `sqlgate serve` with the same channels delivers them within "
            "seconds, each with its old delivery id (receivers drop what they already have).",
        ),
    ] = False,
    ids: Annotated[
        list[int] | None,
        typer.Option("--id", help="With --resend: only this delivery (repeatable).", min=1),
    ] = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Only this run's.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="How many at most.")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """Webhook and e-mail notifications the server sent, newest first, with every failure.

    A delivery that fails is tried again on the retry schedule (SQLGATE_NOTIFY_RETRY, about 7 h
    by default) by any running server; after the last attempt it is a dead letter (status
    failed), listed by --failed and sent again by --resend.

    Example: sqlgate runs notifications --failed; sqlgate runs notifications --resend --id 12
    """
    from orchestrator.features.notify.outbox import NotificationStore
    from orchestrator.interfaces.cli.approvals import state_url
    from orchestrator.wiring import state_database

    if ids and not resend:
        fail("--id picks dead letters to send again: add --resend", as_json=as_json)
    try:
        state = state_database(state_url())
        outbox = state.store(NotificationStore)
        outbox.setup()
        if resend:
            again = outbox.resend(ids or None)
            if as_json:
                emit_json({"resent": again})
            elif again:
                terminal_console().print(
                    f"{len(again)} dead letter(s) queued again ({', '.join(map(str, again))}): "
                    "a running `sqlgate serve` with their channel sends them."
                )
            else:
                terminal_console().print(
                    "No dead letters to send again"
                    + (f" among {', '.join(map(str, ids))}." if ids else ".")
                )
            return
        found = outbox.list(status="failed" if failed else None, run_id=run_id, limit=limit)
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    rows = [d.as_json() for d in found]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        terminal_console().print("No notifications" + (" failed." if failed else " were sent."))
        return
    table = Table(
        "id", "event", "run", "batch", "channel", "status", "attempts", "last error", "at"
    )
    for r in rows:
        table.add_row(
            str(r["id"]),
            r["event"],
            r["run_id"],
            r["batch_id"] or "-",
            r["channel"],
            "dead letter" if r["status"] == "failed" else r["status"],
            str(r["attempts"]),
            r["last_error"] or "-",
            r["updated_at"],
        )
    terminal_console().print(table)
