"""``sqlgate demo``: the whole flow offline, on a generated retail database."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from approvals.terminal_text import terminal_console
from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import (
    JsonOpt,
    Spinner,
    TraceOpt,
    check_edits_with,
    dump_result,
    emit_json,
    err,
    fail,
)


def demo(
    as_json: JsonOpt = False,
    review: Annotated[
        bool,
        typer.Option(
            "--review",
            help="Approve, reject or edit each SQL yourself. Replies are recorded for approved SQL: "
            "a rejection ends the question rejected (its answer is not in the recording), and an "
            "unsafe edit is refused on the spot and asked again.",
        ),
    ] = False,
    workdir: Annotated[
        Path | None,
        typer.Option(help="Where to build the demo database (default: a cache folder)."),
    ] = None,
    trace: TraceOpt = False,
) -> None:
    """Run sample questions over a generated retail database, offline, with recorded model replies.

    No API key and no network: the model's replies are replayed from a cassette recorded against
    sqlgate's own scripted OpenAI-compatible server (scripted, not a real model). Everything else
    is real: the SQLite database, validation, the approval gate, execution and the rate limiter.
    """
    from approvals import ApproveAll, TerminalReviewer
    from orchestrator.features.demo import DEMO_QUESTIONS, DemoSession
    from orchestrator.features.demo.database import default_cache_dir, ensure_demo_database
    from orchestrator.features.render import render_result
    from orchestrator.wiring import run_hooks

    console = terminal_console(stderr=as_json)
    try:
        with console.status("building the demo database…") if console.is_terminal else _null():
            path = ensure_demo_database(workdir or default_cache_dir())
        if review and not sys.stdin.isatty():
            fail("--review needs a terminal", as_json=as_json)
        reviewer = (
            TerminalReviewer(console=err) if review else _ShowingApprover(ApproveAll(), console)
        )
        session = DemoSession.replaying(path, reviewer, hooks=run_hooks())
        check_edits_with(reviewer, session.pipeline)
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    console.print(
        f"[bold]sqlgate demo[/] — database [cyan]{path}[/]\n"
        "[dim]Model replies are replayed from the demo cassette shipped with sqlgate, recorded from sqlgate's "
        "scripted OpenAI-compatible server (scripted, not a real model).[/]\n"
    )
    results = []
    for question in DEMO_QUESTIONS:
        with Spinner(enabled=not as_json) as spinner:
            session.pipeline.progress = spinner
            result = session.ask(question)
        results.append(result)
        if not as_json:
            render_result(console, result, trace=trace)
            console.print()
    calls = sum(r.llm_calls for r in results)
    console.print(
        f"[bold]{len(results)} questions, {calls} LLM calls[/] "
        f"(budget: simple 3, meta 2, one correction 4, ambiguous 1); the rate limiter "
        f"(5 requests / 60 s) held the demo for {session.simulated_wait_s:.0f} s of simulated time."
    )
    if as_json:
        emit_json([dump_result(r) for r in results])


class _ShowingApprover:
    """The demo's reviewer: shows each batch as a reviewer would see it, then approves it."""

    def __init__(self, inner: Any, console: Any) -> None:
        self.inner = inner
        self.console = console

    def __call__(self, batch: Any) -> Any:
        from approvals import TerminalReviewer

        TerminalReviewer(console=self.console).show(batch)
        self.console.print(
            "[dim]demo: approved automatically (run `sqlgate demo --review` to decide yourself)[/]"
        )
        return self.inner(batch)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
