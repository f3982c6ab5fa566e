"""``sqlgate worker``: a Celery worker that advances runs, on any number of hosts.

    SQLGATE_BROKER_URL=redis://queue:6379/1 SQLGATE_STATE_URL=postgresql+psycopg://... \\
    SQLGATE_RATE_BACKEND=redis://queue:6379/2 sqlgate worker --concurrency 4

With ``SQLGATE_BROKER_URL`` set, ``sqlgate serve`` and ``sqlgate approvals decide`` hand runs to
the workers instead of running them in their own process.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import fail_with


def worker(
    concurrency: Annotated[
        int, typer.Option(min=1, help="Runs this worker advances at once (threads).")
    ] = 2,
    name: Annotated[
        str | None,
        typer.Option(
            help="The worker's node name (NAME@HOST), unique among the workers on the broker. "
            "Default: sqlgate-<pid>@<host>, so several workers can run on one host."
        ),
    ] = None,
    grace: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="On SIGTERM, seconds the runs in progress may go on before this worker hands "
            "them back to the others.",
        ),
    ] = 10.0,
    loglevel: Annotated[str, typer.Option(help="Celery's log level.")] = "INFO",
) -> None:
    """Advance runs handed out through the broker (SQLGATE_BROKER_URL); never waits for a reviewer.

    Each task is "advance run R": the worker starts a queued run, resumes a decided one, or takes
    over one whose process stopped, through the state database's conditional updates; a task
    delivered twice changes nothing. A killed worker's task is delivered again, and the run's
    lease decides what needs redoing. On SIGTERM the worker takes no new task, lets the runs in
    progress go on for --grace seconds, then hands back those it still holds (their leases end
    at once and they are sent to the other workers) and exits.
    """
    import orchestrator.interfaces.tasks as tasks

    node = name or tasks.default_worker_name()
    if "@" not in node:
        node = f"{node}@%h"
    tasks.worker_name = node.replace("%h", _host())
    try:
        app = tasks.celery_app()
        tasks.prepare_worker()
    except SqlgateError as exc:
        fail_with(exc)
    from celery import signals  # after celery_app(): a missing extra is named there

    def stopping(**_: Any) -> None:
        tasks.hand_back_after(grace)

    signals.worker_shutting_down.connect(stopping, weak=False)
    app.worker_main(
        [
            "worker",
            "--queues",
            tasks.QUEUE,
            "--pool",
            "threads",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            loglevel,
            "--hostname",
            node,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )


def _host() -> str:
    import socket

    return socket.gethostname()
