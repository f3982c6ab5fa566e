"""A run's ``RunContext``: made for new questions, or restored from a checkpoint to go on.

``RunStart`` holds what every run of a pipeline starts from (the database, the clock, the
default progress, preview size), and makes each run's own context: fresh (``new``), from a
paused or executed checkpoint (``restored``), with the caller's own SQL waiting for review
(``submitted``), with the asker's hints (``hinted``), or with the questions that waited at the
gate let go on (``reopen``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.core.batching import Progress
from orchestrator.core.checkpoint import ExecutedCheckpoint, PausedCheckpoint
from orchestrator.core.database import TargetDatabase
from orchestrator.core.identity import IdentityValue, checked_identity, needed_identity
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunStatus
from orchestrator.core.run_context import ResultSink, RunContext
from safety import Policy
from safety.row_filters import attributes_named

__all__ = ["RunStart"]


@dataclass(frozen=True)
class RunStart:
    """What a pipeline's runs start from; ``streams_release`` lets a streamed question's state
    go once handed out (a pipeline with a reviewer here never checkpoints it)."""

    db: TargetDatabase
    clock: Callable[[], float]
    progress: Progress
    preview_rows: int
    streams_release: bool

    def new(
        self,
        run_id: str,
        questions: list[str],
        progress: Progress | None,
        on_result: ResultSink | None,
        hints: Sequence[str] | None = None,
    ) -> RunContext:
        """A fresh run of ``questions``, each with its hint from ``hints`` (in order) if any."""
        ctx = RunContext(
            run_id=run_id,
            questions=[
                QuestionState(run_id, f"q{i + 1}", text, self.clock)
                for i, text in enumerate(questions)
            ],
            dialect=self.db.dialect,
            preview_rows=self.preview_rows,
            progress=progress or self.progress,
            on_result=on_result,
            release_streamed=on_result is not None and self.streams_release,
        )
        self.hinted(ctx, hints)
        return ctx

    def restored(
        self, checkpoint: PausedCheckpoint | ExecutedCheckpoint, progress: Progress | None
    ) -> RunContext:
        run_id = checkpoint.run_id
        return RunContext(
            run_id=run_id,
            questions=[
                QuestionState.from_checkpoint(run_id, q, self.clock) for q in checkpoint.questions
            ],
            dialect=self.db.dialect,
            preview_rows=self.preview_rows,
            progress=progress or self.progress,
            calls_made=checkpoint.calls_made,
            policy=checkpoint.policy,
            identity=checked_identity(checkpoint.identity),
        )

    def needed(
        self, identity: object, policy: dict[str, object] | None
    ) -> dict[str, IdentityValue] | None:
        """Of the asker's attributes, those the run's policy's row filters name: what the run
        records, its batches show and its validators are bound to."""
        chosen = Policy.from_data(policy) if policy is not None else self.db.policy
        return needed_identity(identity, attributes_named(chosen.safety_policy().row_filters))

    @staticmethod
    def hinted(ctx: RunContext, hints: Sequence[str] | None) -> None:
        """Each question's hint, in order (what the run records and plans with)."""
        for q, hint in zip(ctx.questions, hints or (), strict=False):
            q.hint = (hint or "").strip()

    @staticmethod
    def submitted(ctx: RunContext, statements: Sequence[str] | None) -> None:
        """The caller's own SQL waits for the first approval cycle, one statement per question."""
        if statements is None:
            return
        if len(statements) != len(ctx.questions):
            raise ValueError(
                f"{len(statements)} statements for {len(ctx.questions)} purposes: give one each"
            )
        for q, sql in zip(ctx.questions, statements, strict=True):
            q.agent_sql = True
            q.pending_sql = sql
            q.note("submitted", q.text, sql, started=q.started)

    @staticmethod
    def reopen(ctx: RunContext) -> None:
        """The questions that waited at the gate go on."""
        for q in ctx.questions:
            if q.status == RunStatus.AWAITING_APPROVAL:
                q.status = None
                if q.error is not None and q.error.code == "awaiting_approval":
                    q.error = None
