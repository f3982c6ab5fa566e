"""Scale-out on Celery: "advance run R" tasks, run by ``sqlgate worker`` on any number of hosts.

The broker only carries work; the state database is the truth. A task loads the run and does
what its state asks, through the same conditional updates as everywhere else, so running it
twice (a redelivery, a duplicate enqueue) changes nothing:

    queued                       start it (claim, then the stages up to the gate)
    awaiting_approval, decided   resume it (claim, execute, answer)
    awaiting_approval, pending   nothing: no worker waits for a reviewer
    running/resuming, live lease nothing now; retried when the lease would have expired
    running/resuming, expired    take it over (``Pipeline.recover``)
    finished                     nothing

Tasks are acknowledged late and rejected when their worker is lost, so a killed worker's task
goes back to the queue; the lease decides whether anything needs redoing. Each worker has its own
node name (``sqlgate-<pid>@<host>`` unless ``sqlgate worker --name``), which starts the owner id
of its leases; a worker stopping (SIGTERM) hands the runs it still holds back after a grace
period (``hand_back_after``). A message lost with the broker leaves its run ``queued``: whoever
follows the run sends it again after ``SQLGATE_REQUEUE_AFTER`` seconds (``requeue_after_s``).

Configuration (the same variables as the rest of sqlgate): ``SQLGATE_BROKER_URL`` (Redis, e.g.
``redis://host:6379/1``), ``SQLGATE_STATE_URL`` (PostgreSQL for several hosts),
``SQLGATE_RATE_BACKEND`` (Redis or PostgreSQL, so the limiter is shared), ``SQLGATE_DB`` (the
database, when the run's stored URL had a password), ``OPENAI_*``/``SQLGATE_MODEL``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from orchestrator.core.errors import (
    ConfigurationError,
    RunConflict,
    StateDatabaseError,
    WrongDatabase,
)
from orchestrator.core.extras import needing

if TYPE_CHECKING:
    from celery import Celery, Task

__all__ = [
    "BROKER_URL_ENV",
    "advance_run",
    "celery_app",
    "default_worker_name",
    "enqueue",
    "hand_back_after",
    "prepare_worker",
    "requeue_after_s",
]

log = logging.getLogger("sqlgate.tasks")

BROKER_URL_ENV = "SQLGATE_BROKER_URL"
REQUEUE_ENV = "SQLGATE_REQUEUE_AFTER"
#: A run queued and unclaimed this long (seconds) is sent to the workers again: its message may
#: have been lost with a broker that keeps none (Redis without persistence). A duplicate is
#: harmless: only one process can claim the run.
DEFAULT_REQUEUE_S = 60.0
QUEUE = "sqlgate"
#: Retries of a task that found the run held by a live lease (it waits for the lease to expire).
MAX_LEASE_RETRIES = 120
#: A task whose state database stayed out of reach is tried again this much later (seconds).
STATE_RETRY_S = 5.0


def broker_url() -> str | None:
    return os.environ.get(BROKER_URL_ENV) or None


def requeue_after_s() -> float:
    """``$SQLGATE_REQUEUE_AFTER`` (seconds), else ``DEFAULT_REQUEUE_S``."""
    text = os.environ.get(REQUEUE_ENV) or str(DEFAULT_REQUEUE_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigurationError(
            f"{REQUEUE_ENV} must be a positive number of seconds, not {text!r}"
        )
    return seconds


def celery_app(url: str | None = None) -> Celery:
    """The Celery application of sqlgate (acks late, one task at a time per worker slot)."""
    broker = url or broker_url()
    if not broker:
        raise ConfigurationError(f"no broker: set {BROKER_URL_ENV} (e.g. redis://127.0.0.1:6379/1)")
    celery = needing("running questions on workers", lambda: __import__("celery"))
    app = celery.Celery("sqlgate", broker=broker)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        worker_prefetch_multiplier=1,
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # An unacknowledged task of a worker that vanished is delivered again after this long;
        # a duplicate is harmless (the lease decides), a late one only delays recovery.
        broker_transport_options={
            "visibility_timeout": float(os.environ.get("SQLGATE_BROKER_VISIBILITY", "300"))
        },
    )
    app.task(name="sqlgate.advance_run", bind=True, max_retries=MAX_LEASE_RETRIES)(advance_run)
    return app


_apps: dict[str, Celery] = {}
_lock = threading.Lock()


def enqueue(run_id: str, *, url: str | None = None, countdown: float | None = None) -> None:
    """Ask some worker to advance ``run_id`` (at most once at a time: the lease decides)."""
    broker = url or broker_url()
    if broker is None:
        raise ConfigurationError(f"no broker: set {BROKER_URL_ENV}")
    with _lock:
        app = _apps.get(broker) or _apps.setdefault(broker, celery_app(broker))
    app.send_task("sqlgate.advance_run", args=[run_id], queue=QUEUE, countdown=countdown)


def default_worker_name() -> str:
    """A node name unique to this process: ``sqlgate-<pid>@<host>`` (several workers on one
    host each need their own, RabbitMQ locks a node's control queue to one connection)."""
    return f"sqlgate-{os.getpid()}@{socket.gethostname()}"


#: This worker's node name, set by ``sqlgate worker`` (the owner of its leases starts with it).
worker_name: str | None = None


class _Worker:
    """What one worker process keeps between tasks: state database, limiter, pipelines."""

    def __init__(self) -> None:
        from orchestrator.core.config import Settings
        from orchestrator.core.limits import build_limiter
        from orchestrator.wiring import state_database

        self.settings = Settings.from_env()
        self.state = state_database()
        self.state.setup()
        self.limiter = build_limiter(self.settings, mode="wait")
        self.pipelines: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.owner = f"{worker_name}:{uuid.uuid4().hex[:6]}" if worker_name else None

    def pipeline(self, database_url: str) -> Any:
        from orchestrator.core.database import TargetDatabase
        from orchestrator.core.llm import LLMClient
        from orchestrator.core.pipeline import Pipeline
        from orchestrator.features.memory import memory_for
        from orchestrator.wiring import run_hooks

        url = database_url
        if "***" in url:  # passwords are never stored: the worker's own SQLGATE_DB has it
            url = self.settings.db or ""
            if not url:
                raise ConfigurationError(
                    "the run's database URL had a password: set SQLGATE_DB on the worker"
                )
        with self.lock:
            if url not in self.pipelines:
                self.settings.require_credentials()
                database = TargetDatabase(
                    url,
                    policy=self.settings.policy,
                    statement_timeout_s=self.settings.statement_timeout_s,
                    descriptions=self.settings.descriptions,
                )
                from orchestrator.core.json_mode_memory import JsonModeMemory

                self.pipelines[url] = Pipeline(
                    database,
                    LLMClient(
                        self.settings.llm,
                        limiter=self.limiter,
                        json_mode_memory=JsonModeMemory.in_state_dir(),
                    ),
                    None,
                    config=self.settings.pipeline,
                    approval_store=self.state.approvals,
                    run_store=self.state.runs,
                    hooks=run_hooks(memory_for(self.state, database)),
                    owner=self.owner,
                    asker=self.state.server.owner_of,  # who asked a run authored its SQL
                )
            return self.pipelines[url]


_worker: _Worker | None = None


def _this_worker() -> _Worker:
    global _worker
    with _lock:
        if _worker is None:
            _worker = _Worker()
        return _worker


def prepare_worker() -> None:
    """Open the state database and the limiter and load the pipeline's modules before the first
    task, so a misconfigured worker stops at once and the first run pays no start-up cost."""
    import orchestrator.core.pipeline  # noqa: F401  # the stages, agents, safety and sqlglot with it

    _this_worker()


def hand_back_after(grace_s: float) -> threading.Thread:
    """A stopping worker: let its runs go on for ``grace_s`` seconds, then hand back every run
    it still holds (each lease ends at once and the run is sent to the other workers) so they
    take them over now, not when the leases would have expired."""
    from orchestrator.core.lease import hand_back_all

    def later() -> None:
        time.sleep(grace_s)
        handed = hand_back_all()
        for run_id in handed:
            try:
                enqueue(run_id)
            except Exception as exc:  # the broker is gone too: the lease has ended anyway
                log.warning("run %s handed back but not sent again: %s", run_id, exc)
        if handed:
            log.warning("stopping: handed back %d run(s): %s", len(handed), ", ".join(handed))

    thread = threading.Thread(target=later, name="sqlgate-hand-back", daemon=True)
    thread.start()
    return thread


def advance_run(task: Task, run_id: str) -> str:
    """Do what the run's state asks (see the module docstring); return what was done.

    The state database out of reach for longer than ``$SQLGATE_STATE_PATIENCE`` (each operation
    waits that long first): the task is tried again ``STATE_RETRY_S`` later rather than failed,
    and the run's lease decides then what is left to do."""
    from orchestrator.core.state_patience import connection_lost

    try:
        return _advance(task, run_id)
    except StateDatabaseError as exc:
        log.warning("run %s: %s; trying again in %.0f s", run_id, exc.message, STATE_RETRY_S)
        raise task.retry(countdown=STATE_RETRY_S, max_retries=None) from None
    except Exception as exc:
        if not connection_lost(exc):
            raise
        # An operation outside the stores' patience lost its connection: the task is not
        # failed for it; tried again, the run's lease decides what is left to do.
        log.warning("run %s: state database connection lost (%s); trying again", run_id, exc)
        raise task.retry(countdown=STATE_RETRY_S, max_retries=None) from None


def _advance(task: Task, run_id: str) -> str:
    from orchestrator.core.checkpoint import PausedCheckpoint, StartedCheckpoint

    worker = _this_worker()
    stored = worker.state.runs.load(run_id)
    pipeline = worker.pipeline(stored.database)
    try:
        if stored.status == "queued":
            assert isinstance(stored.checkpoint, StartedCheckpoint)
            results = pipeline.run_batch(
                stored.checkpoint.questions,
                run_id=run_id,
                follow_up_of=stored.follow_up_of,
                statements=stored.checkpoint.statements,
            )
            _settle(worker, run_id, results)
            return "started"
        if stored.lease_expired():
            _settle(worker, run_id, pipeline.recover(run_id))
            return "recovered"
        if stored.status in ("running", "resuming"):
            left = (
                (stored.lease_expires_at - datetime.now(UTC)).total_seconds()
                if stored.lease_expires_at
                else pipeline.config.lease_s
            )
            raise task.retry(countdown=max(0.5, left + 0.1))
        if stored.status == "awaiting_approval" and isinstance(stored.checkpoint, PausedCheckpoint):
            if worker.state.approvals.get_batch(stored.checkpoint.batch_id).status == "pending":
                return "waiting for a reviewer"
            _settle(worker, run_id, pipeline.resume(run_id))
            return "resumed"
    except RunConflict as exc:
        log.info("run %s: %s", run_id, exc.message)
        return "taken by another process"
    except WrongDatabase as exc:  # this worker's database is not the run's: leave it alone
        log.info("run %s: %s", run_id, exc.message)
        return "another database's run"
    return "nothing to do"


def _settle(worker: _Worker, run_id: str, results: list[Any]) -> None:
    """A run the HTTP service accepted: record its results where the service reads them."""
    from orchestrator.interfaces.server.runner import OPEN_STATES, settle

    server = worker.state.server
    if server.owner_of(run_id) is None:
        return  # not a service's run (sqlgate batch --distributed, the CLI)

    def decided(batch_id: str) -> bool:
        return worker.state.approvals.get_batch(batch_id).status != "pending"

    settle(
        server,
        worker.state.runs,
        run_id,
        results,
        from_states=OPEN_STATES,
        notify=lambda: None,  # every server polls the events table
        decided_early=decided,
        resume_soon=enqueue,
    )
