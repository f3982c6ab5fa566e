"""``sqlgate worker``: a Celery worker that advances runs, on any number of hosts.

    SQLGATE_BROKER_URL=redis://queue:6379/1 SQLGATE_STATE_URL=postgresql+psycopg://... \\
    SQLGATE_RATE_BACKEND=redis://queue:6379/2 sqlgate worker --concurrency 4

With ``SQLGATE_BROKER_URL`` set, ``sqlgate serve`` and ``sqlgate approvals decide`` hand runs to
the workers instead of running them in their own process.
"""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli_common import fail
from orchestrator.errors import SqlgateError


def worker(
    concurrency: Annotated[
        int, typer.Option(min=1, help="Runs this worker advances at once (threads).")
    ] = 2,
    loglevel: Annotated[str, typer.Option(help="Celery's log level.")] = "INFO",
) -> None:
    """Advance runs handed out through the broker (SQLGATE_BROKER_URL); never waits for a reviewer.

    Each task is "advance run R": the worker starts a queued run, resumes a decided one, or takes
    over one whose process stopped, through the state database's conditional updates; a task
    delivered twice changes nothing. A killed worker's task is delivered again, and the run's
    lease decides what needs redoing.
    """
    from orchestrator.tasks import QUEUE, celery_app, prepare_worker

    try:
        app = celery_app()
        prepare_worker()
    except SqlgateError as exc:
        fail(exc.message, error_code=exc.code)
        return
    app.worker_main(
        [
            "worker",
            "--queues",
            QUEUE,
            "--pool",
            "threads",
            "--concurrency",
            str(concurrency),
            "--loglevel",
            loglevel,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )
