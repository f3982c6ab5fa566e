"""The ``sqlgate`` command line.

    sqlgate demo                               the whole flow offline, on a generated retail database
    sqlgate ask "QUESTION" --db URL            answer one question; approve the SQL before it runs
    sqlgate batch FILE --db URL --out R.jsonl  many questions, batched calls, ONE approval
    sqlgate approvals list|show|decide|history the reviewer's side of a paused run (ask --defer)
    sqlgate resume RUN_ID                      carry on once a paused run's batch is decided
    sqlgate runs list|show|recover             runs, who advances them, take over stopped ones
    sqlgate worker                             advance runs handed out by a broker (Celery)
    sqlgate schema --db URL [TABLE ...]        what sqlgate sees of a database
    sqlgate validate "SQL" --dialect D         check SQL against the safety policy
    sqlgate limits                             the shared LLM rate-limit window
    sqlgate eval FILE --approve-all            your questions with gold SQL: accuracy, calls, tokens

Every command takes ``--json`` for scripts: results go to stdout as JSON, everything else to
stderr. Exit codes (the README's table; ``orchestrator.core.result.EXIT_CODES``): 0 answered (or
accepted), 1 a command's request refused (``validate``, ``approvals decide``, ``resume``), 2 bad
input or configuration (a malformed database URL too), 3 needs clarification, 4 rejected by the
reviewer, 5 unsafe SQL, 6 execution failed, 7 statement timeout, 8 rate limited, 9 model error,
10 database error, 11 awaiting approval, 12 execution in doubt, 13 ``batch`` with a question
that did not end answered or needing clarification, 14 ``resume`` of a run that belongs to
another database (nothing ran), 15 ``eval`` regressed against its baseline, 16 ``eval
--replay`` did not match its recordings, 130 cancelled.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.core.errors import SqlgateError, StateDatabaseError
from orchestrator.interfaces.cli.common import (
    BaseUrlOpt,
    DbOpt,
    JsonOpt,
    LLMAttemptsOpt,
    LLMMaxTokensOpt,
    LLMTimeoutOpt,
    MaxLimitOpt,
    ModelOpt,
    PolicyOpt,
    RateOpt,
    RoleOpt,
    RowCapOpt,
    Spinner,
    TimeoutOpt,
    TraceOpt,
    YesOpt,
    check_edits_with,
    err,
    fail,
    open_target,
    reviewer_actor,
    reviewer_for,
    show_result,
    terminal_asker,
    terminal_identity,
)

if TYPE_CHECKING:
    from orchestrator.core.result import RunResult
    from orchestrator.core.result_rows import ResultRowStore

app = typer.Typer(
    name="sqlgate",
    help=(
        "Ask a database questions in plain language. sqlgate plans with a model, writes SQL, "
        "checks it against a safety policy, shows it to you ONCE for approval, runs only what you "
        "approved on a read-only connection, and answers in plain language.\n\n"
        "Start with: sqlgate demo"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        from approvals.terminal_text import terminal_console

        try:
            terminal_console(highlight=False).print(f"sqlgate {version('sqlgate')}")
        except PackageNotFoundError:
            terminal_console(highlight=False).print("sqlgate (not installed)")
        raise typer.Exit(0)


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Ask a database questions in plain language, with one approval before any SQL runs."""


def _mount_subcommands() -> None:
    from orchestrator.interfaces.cli.approvals import approvals_app, resume
    from orchestrator.interfaces.cli.batch import batch
    from orchestrator.interfaces.cli.demo import demo
    from orchestrator.interfaces.cli.eval import eval_command
    from orchestrator.interfaces.cli.inspect import limits, schema, validate
    from orchestrator.interfaces.cli.mcp import mcp
    from orchestrator.interfaces.cli.memory import memory_app
    from orchestrator.interfaces.cli.runs import runs_app
    from orchestrator.interfaces.cli.worker import worker

    app.command()(batch)
    app.command()(resume)
    app.command()(demo)
    app.command()(schema)
    app.command()(validate)
    app.command()(limits)
    app.command()(worker)
    app.add_typer(approvals_app, name="approvals")
    app.add_typer(runs_app, name="runs")
    app.command()(mcp)
    app.add_typer(memory_app, name="memory")
    app.command(name="eval")(eval_command)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question, in plain language.")],
    db: DbOpt = None,
    hint_text: Annotated[
        str | None,
        typer.Option(
            "--hint",
            help='What you know that the question does not say ("female refers to gender = '
            "'F'\"): its words and values help find the tables, and the plan sees it.",
        ),
    ] = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_attempts: LLMAttemptsOpt = None,
    llm_max_tokens: LLMMaxTokensOpt = None,
    rate_limit: RateOpt = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the rate limiter instead of failing fast.")
    ] = False,
    row_cap: RowCapOpt = None,
    max_limit: MaxLimitOpt = None,
    timeout: TimeoutOpt = None,
    policy: PolicyOpt = None,
    role: RoleOpt = None,
    trace: TraceOpt = False,
    defer: Annotated[
        bool,
        typer.Option(
            "--defer",
            help="Don't prompt: pause at the gate (exit 11) for a decision from `sqlgate approvals "
            "decide`, then `sqlgate resume RUN_ID`.",
        ),
    ] = False,
    ttl: Annotated[
        float | None,
        typer.Option(help="With --defer: seconds the batch may wait; then it is rejected."),
    ] = None,
    quorum: Annotated[int, typer.Option(help="With --defer: distinct reviewers needed.")] = 1,
    answer: Annotated[
        list[str] | None,
        typer.Option(
            "--answer",
            metavar="ID=TEXT",
            help="Answer a clarifying question by its id (repeatable): if the model asks, the "
            "question is asked again at once with the answers, as a follow-up run.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Also write the full result to FILE (.csv or .jsonl, by extension): every row "
            "kept, within --row-cap and --max-limit. Written whole or not at all.",
        ),
    ] = None,
) -> None:
    """Answer one question from a database, with ONE approval of the SQL before it runs.

    If the question is ambiguous, the model's clarifying questions are shown with their ids: on a
    terminal you answer them there; otherwise answer with --answer ID=TEXT (exit 3 until then).

    Example: sqlgate ask "Top 5 customers by revenue in 2025" --db sqlite:///shop.db --out rows.csv
    """
    from orchestrator.core.pipeline import Pipeline, PipelineConfig
    from orchestrator.core.result_files import check_result_path
    from orchestrator.core.result_rows import ResultRowStore
    from orchestrator.features.clarify import parse_answers
    from orchestrator.features.memory import memory_for
    from orchestrator.interfaces.cli.approvals import stores
    from orchestrator.interfaces.cli.clarify import ClarificationError, clarify, hint
    from orchestrator.wiring import run_hooks

    if not question.strip():
        fail("the question is empty", as_json=as_json, error_code="empty_question")
    if (ttl is not None or quorum != 1) and not defer:
        fail("--ttl and --quorum apply to a deferred approval: add --defer", as_json=as_json)
    try:
        answers = parse_answers(answer or [])
    except ClarificationError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    if out is not None:
        if defer:
            fail(
                "--out writes the result of this run, and --defer ends it at the gate: use one "
                "of them (a deferred run's rows are served by GET /runs/{id}/rows)",
                as_json=as_json,
            )
        try:
            check_result_path(out)
        except SqlgateError as exc:
            fail(exc.message, as_json=as_json, error_code=exc.code)
    from orchestrator.core.lease import lease_from_env

    try:
        lease_s = lease_from_env()
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    config = PipelineConfig(
        admission=not wait,
        approval_ttl_s=ttl,
        approval_quorum=quorum,
        lease_s=lease_s,
    )
    approval_store, run_store = stores() if defer else (None, None)
    database, llm = open_target(
        db=db,
        model=model,
        base_url=base_url,
        rate_limit=rate_limit,
        wait=wait,
        timeout=timeout,
        as_json=as_json,
        policy=policy,
        row_cap=row_cap,
        max_limit=max_limit,
        llm_timeout=llm_timeout,
        llm_attempts=llm_attempts,
        llm_max_tokens=llm_max_tokens,
    )
    # Settings first (a person fixes the key or the URL first), then the gate fails closed
    # before anything runs.
    reviewer = None if defer else reviewer_for(yes, as_json)
    identity = terminal_identity(database.policy, as_json)
    with tempfile.TemporaryDirectory(prefix="sqlgate-rows-") as spool:
        rows = ResultRowStore(f"sqlite:///{spool}/rows.sqlite") if out is not None else None
        with Spinner(enabled=True) as spinner:
            pipeline = Pipeline(
                database,
                llm,
                reviewer,
                config=config,
                progress=spinner,
                approval_store=approval_store,
                run_store=run_store,
                result_rows=rows,
                hooks=run_hooks(memory_for(None, database)),
                actor=reviewer_actor(reviewer, as_json),
                asker=terminal_asker,
            )
            check_edits_with(reviewer, pipeline, identity)
            try:
                result = pipeline.ask(question, role=role, identity=identity, hint=hint_text)
            except SqlgateError as exc:  # an unknown --role
                database.dispose()
                fail(exc.message, as_json=as_json, error_code=exc.code)
                raise
        try:
            result = clarify(
                pipeline,
                result,
                answers,
                as_json=as_json,
                show=lambda r: show_result(r, as_json=False, trace=trace),
                role=role,
                identity=identity,
                hint=hint_text,
            )
        except ClarificationError as exc:
            fail(exc.message, as_json=as_json, error_code=exc.code)
        finally:
            database.dispose()
        show_result(result, as_json=as_json, trace=trace)
        hint(result)
        if out is not None and rows is not None:
            _write_out(out, rows, result, as_json=as_json)
            rows.close()
    raise typer.Exit(result.exit_code)


def _write_out(out: Path, rows: ResultRowStore, result: RunResult, *, as_json: bool) -> None:
    """The full result to ``out`` (atomically), or a line saying why there is none."""
    from orchestrator.core.result_files import write_result_file

    header = rows.header(result.run_id, "q1")
    if header is None:
        err.print(f"[yellow]nothing written to {out}: the run ended {result.status.value}[/]")
        return
    try:
        written = write_result_file(out, header.columns, rows.rows(result.run_id, "q1"))
    except OSError as exc:
        fail(f"cannot write {out}: {exc}", as_json=as_json, error_code="output_error")
        return
    cut = (
        f" [yellow](truncated: the result has more rows than the {header.row_cap} kept)[/]"
        if header.truncated
        else ""
    )
    err.print(f"{written} row(s) written to {out}{cut}")


@app.command()
def serve(
    db: DbOpt = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on (0.0.0.0 for every interface).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    tokens: Annotated[
        str | None,
        typer.Option(
            "--tokens",
            envvar="SQLGATE_TOKENS_FILE",
            help='JSON file of bearer tokens: [{"token"|"sha256": ..., "actor": ..., '
            '"role": "analyst"|"reviewer"|"admin"}]. Env: SQLGATE_TOKENS_FILE (or SQLGATE_TOKENS inline).',
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="Runs executed at once by this process (default 4).")
    ] = None,
    policy: PolicyOpt = None,
) -> None:
    """Serve the HTTP API, live events (SSE) and the analyst and reviewer pages.

    Runs pause at the approval gate; reviewers decide on /reviewer (or over HTTP, or with
    `sqlgate approvals decide`) and the run resumes on whichever process sees the decision.
    Several processes may share one state database (SQLGATE_STATE_URL=postgresql+psycopg://...).

    Example: SQLGATE_TOKENS_FILE=tokens.json sqlgate serve --db sqlite:///shop.db --port 8000
    """
    from orchestrator.core.extras import needing

    try:
        run_server = needing("sqlgate serve", _server)
        run_server(
            host=host,
            port=port,
            db=db,
            tokens_file=tokens,
            workers=workers,
            policy_file=str(policy) if policy else None,
        )
    except SqlgateError as exc:
        fail(exc.message, error_code=exc.code)


def _server() -> Any:
    from orchestrator.interfaces.server import serve as run_server

    return run_server


_mount_subcommands()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        err.print("[yellow]interrupted; nothing was left half-done[/]")
        sys.exit(130)
    except StateDatabaseError as exc:  # the state database cannot be used: one sentence
        err.print(f"[bold red]error:[/] {exc.message}")
        sys.exit(10)
    except SqlgateError as exc:  # a setting found bad after the options were read
        from rich.markup import escape

        err.print(f"[bold red]error:[/] {escape(exc.message)}", soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
