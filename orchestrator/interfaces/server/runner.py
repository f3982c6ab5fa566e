"""Runs in the background: submitted, paused at the gate, resumed once decided, finished.

The HTTP handlers never run a pipeline themselves: ``RunService.submit`` records the run and hands
it to a thread pool, so the event loop never waits on a model call or a query. Every run pauses at
the approval gate (the pipeline has no reviewer here); the decision may come from any process
sharing the state database, and every process's ``EventHub`` tells its ``RunService`` about it:
each tries to resume, exactly one wins (``orchestrator.core.runs.RunStore``'s conditional update).
"""

from __future__ import annotations

import logging
import threading
import traceback
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from approvals import ApprovalStore, BatchNotFound
from orchestrator.core.checkpoint import PausedCheckpoint
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import CheckpointError, RunConflict, RunNotFound, WrongDatabase
from orchestrator.core.identity import Identity
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline, PipelineConfig
from orchestrator.core.result import RunResult, RunStatus
from orchestrator.core.runs import RunStore
from orchestrator.core.server_state import ServerState
from orchestrator.features.memory import ReviewMemory
from orchestrator.interfaces.server.events import ServerEvent

log = logging.getLogger("sqlgate.server")


Progress = Callable[[str, int, int], None]


def shared_pipeline(
    database: TargetDatabase,
    llm: LLMSettings,
    limiter: Any,
    approval_store: ApprovalStore,
    run_store: RunStore,
    *,
    config: PipelineConfig | None = None,
    http_client: Any | None = None,
    memory: ReviewMemory | None = None,
    asker: Callable[[str], str | Sequence[str] | None] | None = None,
) -> Pipeline:
    """The service's one pipeline: it pauses every run at the gate, and serves all runs at once.

    The rate limiter, the read-only database engine, the model client and the stores are
    shared; each run carries its own state (``RunContext``) and progress callback. ``asker``:
    run id -> who asked (the run's owner), recorded with its batches as their author.
    """
    from orchestrator.core.json_mode_memory import JsonModeMemory

    client = LLMClient(
        llm,
        limiter=limiter,
        http_client=http_client,
        json_mode_memory=JsonModeMemory.in_state_dir(),
    )
    from orchestrator.wiring import run_hooks

    return Pipeline(
        database,
        client,
        None,
        config=config,
        approval_store=approval_store,
        run_store=run_store,
        hooks=run_hooks(memory),
        asker=asker,
    )


def settle(
    state: ServerState,
    run_store: RunStore,
    run_id: str,
    results: list[RunResult],
    *,
    from_states: tuple[str, ...],
    notify: Callable[[], None],
    decided_early: Callable[[str], bool],
    resume_soon: Callable[[str], None],
) -> None:
    """Record a run's results as the service shows them (paused at the gate, or finished), with
    the event in the same transaction; used by the server's threads and by Celery workers."""
    dumped = [r.model_dump(mode="json") for r in results]
    waiting = [r for r in results if r.status == RunStatus.AWAITING_APPROVAL]
    if waiting:
        checkpoint = run_store.load(run_id).checkpoint
        if not isinstance(checkpoint, PausedCheckpoint):
            return  # taken over meanwhile: its new owner settles it
        batch_id = checkpoint.batch_id
        items = [
            {"call_id": cid, "question_id": entry.question_id}
            for cid, entry in checkpoint.pending.items()
        ]
        state.update_run(
            run_id,
            status="awaiting_approval",
            expected=from_states,
            batch_id=batch_id,
            results=dumped,
            event=(
                "run_progress",
                {
                    "stage": "awaiting_approval",
                    "done": len(results) - len(waiting),
                    "total": len(results),
                    "items": items,
                },
            ),
        )
        notify()
        if decided_early(batch_id):  # decided before the checkpoint was written
            resume_soon(run_id)
        return
    batch_ids = sorted({a.batch_id for r in results for a in r.approvals})
    items = [
        {
            "call_id": a.call_id,
            "question_id": f"q{i + 1}",
            "status": a.status,
            "batch_id": a.batch_id,
        }
        for i, r in enumerate(results)
        for a in r.approvals
    ]
    state.update_run(
        run_id,
        status="finished",
        expected=from_states,
        batch_id=batch_ids[-1] if batch_ids else None,
        results=dumped,
        event=(
            "run_finished",
            {
                "items": items,
                "batch_ids": batch_ids,
                "statuses": [str(r.status.value) for r in results],
            },
        ),
    )
    notify()


#: Server run states a run may still be in when it is settled (recovered runs come from any).
OPEN_STATES = ("queued", "running", "awaiting_approval", "resuming")


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex[:16]


class RunService:
    """Submits runs to a thread pool and resumes them when their batch is decided.

    Every run is recorded (``queued``) before it is handed to a worker thread, and a thread
    advancing it holds its lease; ``recover()`` (called on start and every half lease by
    ``start_recovery``) takes over the runs of a process that stopped, this one's own after a
    restart included.
    """

    def __init__(
        self,
        state: ServerState,
        approvals: ApprovalStore,
        run_store: RunStore,
        pipeline: Pipeline,
        *,
        workers: int = 4,
        notify: Callable[[], None] = lambda: None,
        dispatch: Callable[[str], None] | None = None,
    ) -> None:
        self.state = state
        self.approvals = approvals
        self.run_store = run_store
        self.pipeline = pipeline
        self.notify = notify
        self.dispatch = dispatch  # "advance run R" on a task engine; None: this process's threads
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sqlgate-run")
        self._resuming: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._recovery: threading.Thread | None = None

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- recovery ----------------------------------------------------------------------------
    def start_recovery(self, interval_s: float | None = None) -> None:
        """Recover stopped runs now and then every ``interval_s`` (default: half a lease)."""
        every = interval_s or self.pipeline.config.lease_s / 2

        def loop() -> None:
            while True:
                try:
                    self.recover()
                except Exception:  # the state database is down: try again next round
                    log.exception("run recovery failed")
                if self._stop.wait(every):
                    return

        self._recovery = threading.Thread(target=loop, name="sqlgate-recovery", daemon=True)
        self._recovery.start()

    def recover(self) -> list[str]:
        """Hand every stopped run of this database (expired lease, or queued and never
        started) to a worker, and resume every run paused at the gate whose batch was decided
        while no process listened (this one was down); other databases' runs are left to their
        own processes, and runs of another login are left by the pipeline's check."""
        target = self.pipeline.db.identity
        stale = self.run_store.expired(queued_for_s=self.pipeline.config.lease_s, target=target)
        for stored in stale:
            if self.dispatch is not None:
                self.dispatch(stored.run_id)
            else:
                self._pool.submit(self._guarded, stored.run_id, self._recover, stored.run_id)
        decided = [
            run_id
            for run_id in self.run_store.waiting_ids(target=target)
            if self.state.owner_of(run_id) is not None and self._decided_while_paused(run_id)
        ]
        for run_id in decided:
            self.resume_soon(run_id)
        return [s.run_id for s in stale] + decided

    def _decided_while_paused(self, run_id: str) -> bool:
        try:
            stored = self.run_store.load(run_id)
        except (RunNotFound, CheckpointError):
            return False
        checkpoint = stored.checkpoint
        return (
            stored.status == "awaiting_approval"
            and isinstance(checkpoint, PausedCheckpoint)
            and not self._undecided(checkpoint.batch_id)
        )

    def _recover(self, run_id: str) -> None:
        try:
            results = self.pipeline.recover(run_id, progress=self._progress(run_id, 0))
        except (RunConflict, WrongDatabase):
            return  # another process took it first, or it is another database's run
        self._settle(run_id, results, from_states=OPEN_STATES)

    # -- submit ------------------------------------------------------------------------------
    def submit(
        self,
        questions: list[str],
        owner: str,
        role: str | None = None,
        *,
        follow_up_of: str | None = None,
        statements: list[str] | None = None,
        identity: Identity | None = None,
        hints: list[str] | None = None,
    ) -> str:
        """Record and start a run; ``role`` (the caller's token role) picks the policy's section
        of that name, when it has one, for every statement of the run; ``follow_up_of`` links a
        follow-up to the run it clarifies; ``statements`` is the caller's own SQL, one per
        question (each question is then its purpose: ``Pipeline.run_batch``); ``identity`` the
        caller's proven attributes, which the run records and its row filters are bound to;
        ``hints`` one per question (recorded with the run, which plans with them)."""
        run_id = new_run_id()
        section = self.pipeline.db.section_for(role)
        self.state.create_run(run_id, owner, questions, follow_up_of=follow_up_of)
        self.pipeline.queue(
            run_id,
            questions,
            role=section,
            follow_up_of=follow_up_of,
            statements=statements,
            identity=identity,
            hints=hints,
        )
        self.notify()
        if self.dispatch is not None:
            self.dispatch(run_id)
        else:
            self._pool.submit(
                self._guarded, run_id, self._start, run_id, questions, follow_up_of, statements
            )
        return run_id

    def _start(
        self,
        run_id: str,
        questions: list[str],
        follow_up_of: str | None = None,
        statements: list[str] | None = None,
    ) -> None:
        self.state.update_run(run_id, status="running", expected=("queued",))
        try:
            results = self.pipeline.run_batch(
                questions,
                run_id=run_id,
                progress=self._progress(run_id, len(questions)),
                follow_up_of=follow_up_of,
                statements=statements,
            )
        except (RunConflict, WrongDatabase):
            return  # recovered by another process while it waited in this one's queue
        self._settle(run_id, results, from_states=("running",))

    # -- resume ------------------------------------------------------------------------------
    def on_event(self, event: ServerEvent) -> None:
        """``EventHub`` listener: a decided or expired batch of one of our runs resumes it."""
        if (
            event.type in ("approval_decided", "approval_expired")
            and self.state.owner_of(event.run_id) is not None
        ):
            self.resume_soon(event.run_id)

    def resume_soon(self, run_id: str) -> None:
        if self.dispatch is not None:
            self.dispatch(run_id)
            return
        with self._lock:
            if run_id in self._resuming:
                return
            self._resuming.add(run_id)
        self._pool.submit(self._guarded, run_id, self._resume, run_id)

    def _resume(self, run_id: str) -> None:
        try:
            row = self.state.run(run_id)
            if row is None or row.status != "awaiting_approval":
                return
            try:
                stored = self.run_store.load(run_id)
            except RunNotFound:
                return  # not checkpointed yet: _settle resumes it once it is
            checkpoint = stored.checkpoint
            if stored.status != "awaiting_approval" or (
                isinstance(checkpoint, PausedCheckpoint) and self._undecided(checkpoint.batch_id)
            ):
                return
            total = len(row.questions)
            try:
                results = self.pipeline.resume(run_id, progress=self._progress(run_id, total))
            except (RunConflict, WrongDatabase):
                return  # another process won the run, or it is another database's run
            self._settle(run_id, results, from_states=("awaiting_approval", "resuming"))
        finally:
            with self._lock:
                self._resuming.discard(run_id)

    def _undecided(self, batch_id: str | None) -> bool:
        if batch_id is None:
            return False
        try:
            return self.approvals.get_batch(batch_id).status == "pending"
        except BatchNotFound:
            return False

    # -- results -----------------------------------------------------------------------------
    def _settle(
        self, run_id: str, results: list[RunResult], *, from_states: tuple[str, ...]
    ) -> None:
        settle(
            self.state,
            self.run_store,
            run_id,
            results,
            from_states=from_states,
            notify=self.notify,
            decided_early=lambda batch_id: not self._undecided(batch_id),
            resume_soon=self.resume_soon,
        )

    def _progress(self, run_id: str, total: int) -> Progress:
        def progress(stage: str, done: int = 0, of: int = 0) -> None:
            self.state.append_event(
                run_id, None, "run_progress", {"stage": stage, "done": done, "total": of or total}
            )
            self.notify()

        return progress

    def _guarded(self, run_id: str, work: Callable[..., None], *args: Any) -> None:
        try:
            work(*args)
        except Exception as exc:  # a run must end with an event, whatever went wrong
            log.exception("run %s failed", run_id)
            error = {
                "code": getattr(exc, "code", "server_error"),
                "message": str(exc) or type(exc).__name__,
                "trace": traceback.format_exc(limit=5),
            }
            self.state.update_run(
                run_id,
                status="failed",
                error=error,
                event=(
                    "run_finished",
                    {
                        "items": [],
                        "statuses": [],
                        "error": {k: error[k] for k in ("code", "message")},
                    },
                ),
            )
            self.notify()
