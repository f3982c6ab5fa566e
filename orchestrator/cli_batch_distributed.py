"""``sqlgate batch --distributed``: the file's runs handed to ``sqlgate worker`` processes.

Each run (``--run-size`` questions) is recorded ``queued`` in the state database and one
"advance run" task is put on the broker (``orchestrator.tasks``). This process then only follows
the runs in the state database: it decides each batch that opens at the gate (``--yes`` or the
terminal prompt, as the in-process batch does), hands the decided run back to the workers, and
writes each run's results to ``--out`` as the run finishes.

Run ids are derived from the results file and the run's questions, so the same command run
again after an interruption follows the runs already on the workers instead of starting them
twice.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.cli_common import err, fail, fail_with
from orchestrator.errors import RunNotFound, SqlgateError
from orchestrator.result import RunResult

#: How often the state database is read while the runs go on (seconds).
POLL_S = 0.5
#: How often a run whose lease expired is handed to the workers again (seconds).
NUDGE_S = 10.0


def run_id_for(out: Path, questions: list[str]) -> str:
    """The same results file and the same questions give the same run id."""
    digest = hashlib.sha256("\n".join([str(out.resolve()), *questions]).encode()).hexdigest()
    return f"run_batch_{digest[:16]}"


def run_distributed(
    chunks: list[list[str]],
    *,
    out: Path,
    db: str | None,
    yes: bool,
    timeout: float | None,
    write: Callable[[RunResult], None],
) -> int:
    """Queue one run per chunk and follow them until every one ended; the number of runs."""
    from orchestrator.config import Settings
    from orchestrator.database import TargetDatabase
    from orchestrator.state_db import StateDatabase
    from orchestrator.tasks import BROKER_URL_ENV, broker_url

    broker = broker_url()
    if broker is None:
        fail(
            f"--distributed hands the runs to `sqlgate worker` processes through a broker: "
            f"set {BROKER_URL_ENV} (e.g. redis://127.0.0.1:6379/1) here and on the workers"
        )
        return 0
    reviewer = _reviewer(yes)
    settings = Settings.from_env()
    try:
        # Opened once here, so a bad URL or an unreachable database is told now, not by a worker.
        target = TargetDatabase(
            db or settings.db or "", statement_timeout_s=timeout or settings.statement_timeout_s
        )
        database_url = target.safe_url
        target.dispose()
        state = StateDatabase()
        state.setup()
    except SqlgateError as exc:
        fail_with(exc)
        return 0
    follower = _Follower(state, broker, reviewer, write, db=db or settings.db)
    try:
        for questions in chunks:
            follower.submit(run_id_for(out, questions), database_url, questions)
        follower.follow()
    except KeyboardInterrupt:
        left = sorted(follower.open)
        err.print(
            f"[yellow]interrupted:[/] {len(left)} run(s) go on on the workers "
            "(`sqlgate runs list`); the same command again follows them and writes their results."
        )
        raise
    finally:
        state.close()
    return len(chunks)


def _reviewer(yes: bool) -> Any:
    from orchestrator.cli_common import reviewer_for

    return reviewer_for(yes, as_json=False)


class _Follower:
    """The runs of one command: queued, decided at the gate, written out when finished."""

    def __init__(
        self,
        state: Any,
        broker: str,
        reviewer: Any,
        write: Callable[[RunResult], None],
        *,
        db: str | None = None,
    ) -> None:
        self.state = state
        self.db = db  # edits are checked against this database's schema, under the batch's policy
        self.broker = broker
        self.reviewer = reviewer
        self.write = write
        self.open: dict[str, int] = {}  # run_id -> questions in it
        self.states: dict[str, str] = {}
        self.nudged: dict[str, float] = {}  # run_id -> when a takeover was last asked for
        self.total_runs = 0
        self.total_questions = 0
        self.finished_questions = 0

    def submit(self, run_id: str, database_url: str, questions: list[str]) -> None:
        from orchestrator.checkpoint import StartedCheckpoint
        from orchestrator.tasks import enqueue

        self.total_runs += 1
        self.total_questions += len(questions)
        self.open[run_id] = len(questions)
        try:
            self.states[run_id] = self.state.runs.load(run_id).status
            return  # queued by an earlier, interrupted command: follow it
        except RunNotFound:
            pass
        self.state.runs.create(
            run_id,
            database_url,
            StartedCheckpoint(run_id=run_id, questions=questions),
            status="queued",
        )
        self.states[run_id] = "queued"
        self._enqueue(run_id, enqueue)

    def _enqueue(self, run_id: str, enqueue: Callable[..., None]) -> None:
        try:
            enqueue(run_id, url=self.broker)
        except SqlgateError:
            raise
        except Exception as exc:  # kombu/redis raise their own connection errors
            fail(f"cannot hand run {run_id} to the broker: {exc}", error_code="broker_unreachable")

    def follow(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[line]}"),
            console=err,
        )
        runs_bar = progress.add_task("runs on the workers", total=self.total_runs, line="")
        questions_bar = progress.add_task("questions", total=self.total_questions, line="")
        with progress:
            while self.open:
                for run_id in list(self.open):
                    self._advance(run_id, progress)
                counts = Counter(self.states[r] for r in self.open)
                line = " · ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items())
                progress.update(
                    runs_bar, completed=self.total_runs - len(self.open), line=line or "done"
                )
                progress.update(questions_bar, completed=self.finished_questions)
                if self.open:
                    time.sleep(POLL_S)

    def _advance(self, run_id: str, progress: Any) -> None:
        from orchestrator.checkpoint import FinishedCheckpoint, PausedCheckpoint
        from orchestrator.tasks import enqueue

        stored = self.state.runs.load(run_id)
        self.states[run_id] = stored.status
        if stored.status == "finished":
            assert isinstance(stored.checkpoint, FinishedCheckpoint)
            for result in stored.checkpoint.results:
                self.write(result)
            flush = getattr(self.write, "flush", None)
            if flush is not None:  # the run's results made durable together
                flush()
            self.finished_questions += self.open.pop(run_id)
            return
        if stored.lease_expired():
            # Its worker stopped (killed, or its task failed): ask some worker to take it over
            # now rather than when the broker gives the task back.
            self._nudge(run_id, enqueue)
            return
        if stored.status == "awaiting_approval" and isinstance(stored.checkpoint, PausedCheckpoint):
            record = self.state.approvals.get_batch(stored.checkpoint.batch_id)
            if record.status == "pending":
                progress.stop()  # the prompt needs the terminal
                try:
                    self._decide(record)
                finally:
                    progress.start()
            else:
                # Decided, and still no worker on it after NUDGE_S (its task was lost with a
                # worker, or failed): ask again; a task that finds nothing to do does nothing.
                self.nudged.setdefault(run_id, time.monotonic())
                self._nudge(run_id, enqueue)

    def _nudge(self, run_id: str, enqueue: Callable[..., None]) -> None:
        """Hand ``run_id`` to the workers again, at most once in ``NUDGE_S``."""
        if time.monotonic() - self.nudged.get(run_id, -NUDGE_S) >= NUDGE_S:
            self.nudged[run_id] = time.monotonic()
            self._enqueue(run_id, enqueue)

    def _decide(self, record: Any) -> None:
        """Decide one batch at the gate as the in-process batch would, and hand the run back."""
        from approvals import ApprovalError, TerminalReviewer, reviewer_identity
        from orchestrator.cli_approvals import gate_for
        from orchestrator.tasks import enqueue

        gate = gate_for(record, self.state.approvals, self.state.runs, self.db)
        reviewer = self.reviewer
        if isinstance(reviewer, TerminalReviewer):
            err.print(f"[bold]{len(record.batch.pending)} statement(s) in one approval batch[/]")
            reviewer = TerminalReviewer(console=err, validate=gate.validate)
        try:
            decisions = reviewer(record.batch)
        except ApprovalError as exc:
            fail(str(exc), 130, error_code="approval_cancelled")
            return
        try:
            outcome = gate.submit(record.batch_id, decisions, actor=reviewer_identity())
        except ApprovalError as exc:
            code = getattr(exc, "code", "decision_refused")
            if code in ("decision_conflict", "batch_expired"):
                return  # decided elsewhere (`sqlgate approvals decide`) or expired: follow on
            fail(str(exc), 1, error_code=code)
            return
        if str(outcome.status) != "pending":
            self._enqueue(record.batch.run_id, enqueue)
