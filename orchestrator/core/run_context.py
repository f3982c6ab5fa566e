"""``RunContext``: one run's state as it moves through the stages, passed explicitly.

The pipeline object holds only what every run shares (the database, the LLM client, the reviewer,
the stores, the configuration), so one pipeline serves any number of concurrent runs. Everything a
run gathers lives here: its questions, its own count of LLM calls, which results were handed out
already, the progress callback of whoever started it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from orchestrator.core.batching import BatchedCalls, Progress
from orchestrator.core.identity import IdentityValue
from orchestrator.core.lease import Lease
from orchestrator.core.llm import LLMClient
from orchestrator.core.question import QuestionState
from orchestrator.core.result import RunResult, RunStatus

__all__ = ["ResultSink", "RunContext", "no_progress"]

#: ``on_result(index, result)``: a finished question, handed out as soon as it is finished.
#: A sink that also has a ``flush()`` method is told when a stage's results were all handed
#: out (``sqlgate batch`` makes its file durable then: once per stage, not once per record).
ResultSink = Callable[[int, RunResult], None]


def no_progress(stage: str, done: int = 0, total: int = 0) -> None:
    return None


@dataclass
class RunContext:
    """One run: its questions, its LLM-call count and where its results go.

    ``calls_made`` starts at the calls a resumed run had already made, so call indices in the
    trace go on from where the run paused. ``release_streamed`` lets a streamed question's state
    go once it was handed out (nothing will checkpoint it).
    """

    run_id: str
    questions: list[QuestionState]
    dialect: str
    preview_rows: int
    progress: Progress = no_progress
    on_result: ResultSink | None = None
    release_streamed: bool = False
    calls_made: int = 0
    catalogue_ms: float = 0.0
    policy: dict[str, object] | None = None
    #: The asker's attributes (a proven identity's), which the run's row filters are bound to.
    identity: dict[str, IdentityValue] | None = None
    emitted: set[str] = field(default_factory=set)
    #: (status, version) the run holds in the run store while this process advances it.
    stored: tuple[str, int] | None = None
    #: The lease this process holds on the run, when it is recorded.
    lease: Lease | None = None
    #: The run whose clarifying questions this run answers (the clarification feature).
    follow_up_of: str | None = None
    #: The database the run is recorded for (its URL without password), which memory keys on.
    database: str | None = None
    #: The schema changed since the statements waiting were approved: validate them again.
    schema_changed: bool = False
    #: Results handed out since the sink was last told to flush.
    unflushed: bool = False

    def next_call_index(self) -> int:
        """The index of the run's next LLM call (1, 2, ...); ``LeaseLost`` instead when this
        process no longer holds the run (handed back by a stopping worker, or taken over), so
        nothing more is asked of the model for a run another process now advances."""
        if self.lease is not None:
            self.lease.check()
        self.calls_made += 1
        return self.calls_made

    def batched_calls(self, llm: LLMClient, *, k: int, max_prompt_chars: int) -> BatchedCalls:
        return BatchedCalls(
            llm,
            k=k,
            max_prompt_chars=max_prompt_chars,
            progress=self.progress,
            next_index=self.next_call_index,
        )

    def active(self) -> list[QuestionState]:
        return [q for q in self.questions if q.active]

    def emit(self, *, flush: bool = True, only: QuestionState | None = None) -> None:
        """Hand every newly finished question (or just ``only``, the one a stage has just
        finished: no scan of the whole run) to ``on_result``; then, unless ``flush`` is False (a
        stage handing out its results one by one), tell a sink with ``flush()`` that what it was
        handed since the last time is complete."""
        if self.on_result is None:
            return
        candidates = (
            enumerate(self.questions) if only is None else [(self.questions.index(only), only)]
        )
        for index, q in candidates:
            if (
                q.status is not None
                and q.status != RunStatus.AWAITING_APPROVAL
                and q.qid not in self.emitted
            ):
                self.emitted.add(q.qid)
                self.on_result(index, self._result(q))
                self.unflushed = True
                if self.release_streamed:
                    q.release()
        done = getattr(self.on_result, "flush", None)
        if flush and self.unflushed and done is not None:
            done()
            self.unflushed = False

    def results(self) -> list[RunResult]:
        self.emit()
        return [self._result(q) for q in self.questions]

    def _result(self, q: QuestionState) -> RunResult:
        result = q.to_result(self.dialect, self.preview_rows)
        result.follow_up_of = self.follow_up_of
        return result
