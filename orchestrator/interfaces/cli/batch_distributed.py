"""``sqlgate batch --distributed``: the file's runs handed to ``sqlgate worker`` processes.

The batch is recorded once, at the start, in the state database (``orchestrator.core.batches``): a
batch id derived from the input file's content and the command's options, and one ``queued`` run
per ``--run-size`` questions. One "advance run" task per run goes on the broker
(``orchestrator.interfaces.tasks``). This process then only follows the runs in the state database: it
decides each batch that opens at the gate (``--yes`` or the terminal prompt, as the in-process
batch does), hands the decided run back to the workers, and writes each run's results to
``--out`` from the run record as the run finishes.

The same command run again (same input file, same options) finds the batch and follows the same
runs, whatever the results file holds: nothing is asked twice. A run still ``queued`` and
unclaimed after ``SQLGATE_REQUEUE_AFTER`` seconds is sent again (its message may have been lost
with the broker); a run whose lease expired is handed to the workers at once. A broker that
cannot be reached is tried again with backoff; the command gives up (exit 2) only after
``SQLGATE_BROKER_PATIENCE`` seconds (default 300) without reaching it, and the runs stay recorded.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.core.errors import ConfigurationError, SqlgateError
from orchestrator.core.result import RunResult
from orchestrator.interfaces.cli.common import err, fail, fail_with

#: How often the state database is read while the runs go on (seconds).
POLL_S = 0.5
#: How often a run whose lease expired is handed to the workers again (seconds).
NUDGE_S = 10.0
#: The broker is tried again after 0.5 s, then twice as long each time, up to this (seconds).
BROKER_BACKOFF_MAX_S = 15.0
BROKER_PATIENCE_ENV = "SQLGATE_BROKER_PATIENCE"
DEFAULT_BROKER_PATIENCE_S = 300.0


@dataclass
class DistributedOutcome:
    """What the command did: the batch, its runs, and every result of its runs."""

    batch_id: str
    runs: int
    results: list[RunResult] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    found: bool = False


def run_distributed(
    content: bytes,
    questions: list[str],
    *,
    out: Path,
    db: str | None,
    yes: bool,
    run_size: int,
    timeout: float | None,
    kept: dict[str, dict[str, Any]],
    written: set[tuple[str, str]],
    write: Callable[[RunResult], None],
    hints: dict[str, str] | None = None,
) -> DistributedOutcome:
    """Record the batch (or find it), queue its runs and follow them until every one ended.

    ``kept`` holds the final results already in the results file by question (a batch recorded
    now leaves their questions out); ``written`` the (run id, question) pairs already written,
    so a result is written once whatever the file held. ``hints`` (question -> hint, from the
    file) are recorded with the runs, and the workers plan with them.
    """
    from orchestrator.core.batches import batch_id_for
    from orchestrator.core.config import Settings
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.identity import identity_key
    from orchestrator.interfaces.reviewer_identity import cli_asker_identity
    from orchestrator.interfaces.tasks import BROKER_URL_ENV, broker_url, requeue_after_s
    from orchestrator.wiring import state_database

    broker = broker_url()
    if broker is None:
        fail(
            f"--distributed hands the runs to `sqlgate worker` processes through a broker: "
            f"set {BROKER_URL_ENV} (e.g. redis://127.0.0.1:6379/1) here and on the workers"
        )
        raise AssertionError("fail exits")  # pragma: no cover
    reviewer = _reviewer(yes)
    settings = Settings.from_env()
    try:
        requeue_s = requeue_after_s()
        patience_s = _broker_patience_s()
        # Opened once here, so a bad URL or an unreachable database is told now, not by a worker.
        target = TargetDatabase(
            db or settings.db or "", statement_timeout_s=timeout or settings.statement_timeout_s
        )
        database_url = target.safe_url
        login = target.login_for()
        target.dispose()
        state = state_database()
        state.setup()
        options = {
            "db": database_url,
            "out": str(out.resolve()),
            "run_size": run_size,
            "timeout": timeout,
        }
        identity = cli_asker_identity()
        if identity:  # another asker's batch of the same questions is another batch
            options["asker"] = identity_key(identity)
        batch_id = batch_id_for(content, options)
        recorded = state.batches.load(batch_id)
        if recorded is None:
            todo = _unique([q for q in questions if q not in kept])
            chunks = [todo[i : i + run_size] for i in range(0, len(todo), run_size)]
            if not chunks:
                err.print(f"every question already has a final result in {out}; nothing to ask.")
                return DistributedOutcome(batch_id, 0)
            recorded = state.batches.record(
                batch_id,
                database_url,
                chunks,
                options=options,
                login=login,
                identity=identity,
                hints=hints,
            )
    except SqlgateError as exc:
        fail_with(exc)
    asked = sum(len(r.questions) for r in recorded.runs)
    if recorded.created:
        err.print(
            f"batch {batch_id}: {len(recorded.runs)} run(s), {asked} question(s) recorded in the "
            "state database."
        )
    else:
        err.print(
            f"batch {batch_id} was recorded by an earlier command: following its "
            f"{len(recorded.runs)} run(s) ({asked} question(s)), whatever {out} holds."
        )
    follower = _Follower(
        state,
        broker,
        reviewer,
        write,
        written=written,
        db=db or settings.db,
        requeue_s=requeue_s,
        patience_s=patience_s,
    )
    try:
        for run in recorded.runs:
            follower.submit(run.run_id, len(run.questions))
        follower.follow()
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted:[/] {len(follower.open)} run(s) go on on the workers "
            "(`sqlgate runs list`); the same command again follows them and writes their results."
        )
        raise
    finally:
        state.close()
    by_run = {run.run_id: i for i, run in enumerate(recorded.runs)}
    results = sorted(follower.results, key=lambda r: by_run[r.run_id])  # the file's order
    return DistributedOutcome(
        batch_id,
        len(recorded.runs),
        results,
        run_ids=list(by_run),
        found=not recorded.created,
    )


def _broker_patience_s() -> float:
    text = os.environ.get(BROKER_PATIENCE_ENV) or str(DEFAULT_BROKER_PATIENCE_S)
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigurationError(
            f"{BROKER_PATIENCE_ENV} must be a positive number of seconds, not {text!r}"
        )
    return seconds


def _unique(questions: list[str]) -> list[str]:
    return list(dict.fromkeys(questions))


def _reviewer(yes: bool) -> Any:
    from orchestrator.interfaces.cli.common import reviewer_for

    return reviewer_for(yes, as_json=False)


class _Follower:
    """The runs of one batch: sent to the workers, decided at the gate, written out when
    finished (from the run record)."""

    def __init__(
        self,
        state: Any,
        broker: str,
        reviewer: Any,
        write: Callable[[RunResult], None],
        *,
        written: set[tuple[str, str]],
        db: str | None = None,
        requeue_s: float,
        patience_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.db = db  # edits are checked against this database's schema, under the batch's policy
        self.broker = broker
        self.reviewer = reviewer
        self.write = write
        self.written = written
        self.requeue_s = requeue_s
        self.patience_s = patience_s
        self.clock = clock
        self.open: dict[str, int] = {}  # run_id -> questions in it
        self.states: dict[str, str] = {}
        self.sent: dict[str, float] = {}  # run_id -> when it was last handed to the broker
        self.unsent: set[str] = set()  # runs to hand to the broker once it answers again
        self.broker_down_since: float | None = None
        self.broker_retry_at = 0.0
        self.broker_backoff = 0.5
        self.results: list[RunResult] = []
        self.total_runs = 0
        self.total_questions = 0
        self.finished_questions = 0

    def submit(self, run_id: str, questions: int) -> None:
        """Follow ``run_id``; a run nobody claimed yet is handed to the broker (again: a
        duplicate message is harmless, the claim decides)."""
        self.total_runs += 1
        self.total_questions += questions
        self.open[run_id] = questions
        self.states[run_id] = self.state.runs.load(run_id).status
        if self.states[run_id] == "queued":
            self._send(run_id)

    def _send(self, run_id: str) -> None:
        """Hand ``run_id`` to the broker now, or once it answers again (with backoff)."""
        from orchestrator.interfaces.tasks import enqueue

        now = self.clock()
        if self.broker_down_since is not None and now < self.broker_retry_at:
            self.unsent.add(run_id)
            return
        try:
            enqueue(run_id, url=self.broker)
        except SqlgateError:
            raise
        except Exception as exc:  # kombu/redis/amqp raise their own connection errors
            self._broker_failed(run_id, exc, now)
            return
        self.sent[run_id] = now
        self.unsent.discard(run_id)
        if self.broker_down_since is not None:
            err.print("[green]the broker answers again[/]")
        self.broker_down_since = None
        self.broker_backoff = 0.5

    def _broker_failed(self, run_id: str, exc: Exception, now: float) -> None:
        self.unsent.add(run_id)
        if self.broker_down_since is None:
            self.broker_down_since = now
        down = now - self.broker_down_since
        if down >= self.patience_s:
            fail(
                f"the broker has not answered for {down:.0f} s ({type(exc).__name__}: {exc}); "
                f"{len(self.open)} run(s) stay recorded: the same command again follows them",
                error_code="broker_unreachable",
            )
        err.print(
            f"[yellow]the broker does not answer ({type(exc).__name__}); trying again in "
            f"{self.broker_backoff:.1f} s[/]",
            highlight=False,
        )
        self.broker_retry_at = now + self.broker_backoff
        self.broker_backoff = min(BROKER_BACKOFF_MAX_S, self.broker_backoff * 2)

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
                for run_id in sorted(self.unsent):
                    if run_id in self.open:
                        self._send(run_id)
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
        from orchestrator.core.checkpoint import FinishedCheckpoint, PausedCheckpoint

        stored = self.state.runs.load(run_id)
        self.states[run_id] = stored.status
        if stored.status == "finished":
            assert isinstance(stored.checkpoint, FinishedCheckpoint)
            for result in stored.checkpoint.results:
                self.results.append(result)
                if (result.run_id, result.question) not in self.written:
                    self.write(result)
                    self.written.add((result.run_id, result.question))
            flush = getattr(self.write, "flush", None)
            if flush is not None:  # the run's results made durable together
                flush()
            self.finished_questions += self.open.pop(run_id)
            return
        if run_id in self.unsent:
            return  # waiting for the broker
        if stored.status == "queued" and stored.owner is None:
            # Nobody claimed it: its message may have been lost (a broker without persistence
            # restarted). Send it again once it waited that long since it was queued or sent.
            waited = (datetime.now(UTC) - stored.updated_at).total_seconds()
            since_sent = self.clock() - self.sent.get(run_id, -self.requeue_s)
            if waited >= self.requeue_s and since_sent >= self.requeue_s:
                self._send(run_id)
            return
        if stored.lease_expired():
            # Its worker stopped (killed, or its task failed): ask some worker to take it over
            # now rather than when the broker gives the task back.
            self._nudge(run_id)
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
                self.sent.setdefault(run_id, self.clock())
                self._nudge(run_id)

    def _nudge(self, run_id: str) -> None:
        """Hand ``run_id`` to the workers again, at most once in ``NUDGE_S``."""
        if self.clock() - self.sent.get(run_id, -NUDGE_S) >= NUDGE_S:
            self._send(run_id)

    def _decide(self, record: Any) -> None:
        """Decide one batch at the gate as the in-process batch would, and hand the run back."""
        from approvals import ApprovalError, ApproveAll, TerminalReviewer
        from orchestrator.interfaces.cli.approvals import gate_for
        from orchestrator.interfaces.reviewer_identity import cli_reviewer

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
            outcome = gate.submit(
                record.batch_id,
                decisions,
                actor=cli_reviewer(),
                review="unseen" if isinstance(reviewer, ApproveAll) else "reviewed",
            )
        except ApprovalError as exc:
            code = getattr(exc, "code", "decision_refused")
            if code in ("decision_conflict", "batch_expired"):
                return  # decided elsewhere (`sqlgate approvals decide`) or expired: follow on
            fail(str(exc), 1, error_code=code)
            return
        if str(outcome.status) != "pending":
            self._send(record.batch.run_id)
