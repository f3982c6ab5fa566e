"""``sqlgate batch``: a file of questions, batched LLM calls, ONE approval, results streamed out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import (
    BaseUrlOpt,
    DbOpt,
    LLMAttemptsOpt,
    LLMMaxTokensOpt,
    LLMTimeoutOpt,
    MaxLimitOpt,
    ModelOpt,
    PolicyOpt,
    RateOpt,
    RoleOpt,
    RowCapOpt,
    TimeoutOpt,
    YesOpt,
    check_edits_with,
    err,
    fail,
    open_target,
    reviewer_actor,
    reviewer_for,
    terminal_asker,
    terminal_identity,
)

if TYPE_CHECKING:  # the result model loads pydantic and the model client: not for --help
    from orchestrator.core.result import RunResult, RunStatus


def batch(
    questions_file: Annotated[
        Path,
        typer.Argument(
            help="Questions: .txt (one per line), .csv (a 'question' column) or .jsonl; a "
            "'hint' (or 'evidence') column or key adds what the question does not say."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Results file: .jsonl or .csv. A re-run resumes it.")
    ],
    db: DbOpt = None,
    yes: YesOpt = False,
    k: Annotated[int, typer.Option(help="Questions per LLM call at most.")] = 10,
    context_tokens: Annotated[
        int,
        typer.Option(
            help="The model's context size in tokens; fewer questions go in a call when it is small."
        ),
    ] = 32_000,
    run_size: Annotated[
        int | None,
        typer.Option(
            help="Questions per run (one approval prompt each); bounds memory on huge files. "
            "Default 1000, or --k with --distributed (one run per task, spread over the workers).",
            min=1,
        ),
    ] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    llm_timeout: LLMTimeoutOpt = None,
    llm_attempts: LLMAttemptsOpt = None,
    llm_max_tokens: LLMMaxTokensOpt = None,
    rate_limit: RateOpt = None,
    fail_fast: Annotated[
        bool,
        typer.Option("--fail-fast", help="Stop when the rate limit is reached instead of waiting."),
    ] = False,
    row_cap: RowCapOpt = None,
    max_limit: MaxLimitOpt = None,
    timeout: TimeoutOpt = None,
    policy: PolicyOpt = None,
    role: RoleOpt = None,
    distributed: Annotated[
        bool,
        typer.Option(
            "--distributed",
            help="Hand the runs to `sqlgate worker` processes through the broker in "
            "SQLGATE_BROKER_URL (all sharing SQLGATE_STATE_URL) instead of running them here; "
            "the model, limiter, row cap and LIMIT are then the workers' settings.",
        ),
    ] = False,
) -> None:
    """Answer a file of questions with batched LLM calls and ONE approval for the whole batch.

    Results are written to --out as each question finishes. Run the same command again after an
    interruption: questions already answered are skipped. Exit status: 0 when every question
    ended answered or needing clarification, 13 when any ended otherwise (see the file), 2 for
    bad input.

    Example: sqlgate batch questions.txt --db sqlite:///shop.db --out results.jsonl

    Scaled out: SQLGATE_BROKER_URL=redis://queue:6379/1 SQLGATE_STATE_URL=postgresql+psycopg://...
    sqlgate batch questions.txt --db URL --out results.jsonl --distributed --yes
    """
    from orchestrator.core.batch_io import (
        ResultWriter,
        pending_questions,
        read_hints,
        read_questions,
    )
    from orchestrator.core.pipeline import Pipeline, PipelineConfig
    from orchestrator.core.result import RunStatus
    from orchestrator.features.memory import memory_for
    from orchestrator.wiring import run_hooks

    try:
        questions = read_questions(questions_file)
        hints = read_hints(questions_file)
        writer = ResultWriter(out)
        if distributed:
            existing = writer.reopen()
        else:
            done = writer.resume()
    except SqlgateError as exc:
        fail(exc.message, error_code=exc.code)
        return
    if distributed:
        _distributed(
            questions_file,
            questions,
            existing,
            out,
            writer,
            db=db,
            yes=yes,
            run_size=run_size or k,
            timeout=timeout,
            hints=hints,
        )
        return
    todo = list(pending_questions(questions, done))
    err.print(
        f"{len(questions)} question(s) in {questions_file}; {len(done)} already answered in {out}; "
        f"{len(todo)} to go."
    )
    if not todo:
        raise typer.Exit(batch_exit_code([RunStatus(r["status"]) for r in done.values()]))
    run_size = run_size or 1000
    # About four characters a token; half the context for the questions' part of a prompt.
    config = PipelineConfig(k=k, max_prompt_chars=max(1000, context_tokens * 2))
    database, llm = open_target(
        db=db,
        model=model,
        base_url=base_url,
        rate_limit=rate_limit,
        wait=not fail_fast,
        timeout=timeout,
        as_json=False,
        policy=policy,
        row_cap=row_cap,
        max_limit=max_limit,
        llm_timeout=llm_timeout,
        llm_attempts=llm_attempts,
        llm_max_tokens=llm_max_tokens,
    )
    try:
        database.policy_for(role)  # an unknown role: one sentence before any call is made
    except SqlgateError as exc:
        fail(exc.message, error_code=exc.code)
    reviewer = reviewer_for(yes, as_json=False)  # after the settings: the order a person fixes
    identity = terminal_identity(database.policy)
    records: list[RunResult] = []
    written = _Written(writer, records)

    with writer, StageBars() as bars:
        llm.on_retry = bars.notice
        llm.limiter.on_wait = bars.limiter_wait
        pipeline = Pipeline(
            database,
            llm,
            reviewer,
            config=config,
            progress=bars,
            hooks=run_hooks(memory_for(None, database)),
            actor=reviewer_actor(reviewer),
            asker=terminal_asker,
        )
        check_edits_with(reviewer, pipeline, identity)
        for start in range(0, len(todo), run_size):
            chunk = [q for _, q in todo[start : start + run_size]]
            pipeline.run_batch(
                chunk,
                on_result=written,
                role=role,
                identity=identity,
                hints=[hints.get(q, "") for q in chunk] if hints else None,
            )
    database.dispose()
    err.print(summary(records, out, llm.calls))
    statuses = [r.status for r in records] + [RunStatus(r["status"]) for r in done.values()]
    raise typer.Exit(batch_exit_code(statuses))


class _Written:
    """The pipeline's result sink: each record to the file as it comes, made durable once per
    stage (``flush``), not once per record."""

    def __init__(self, writer: Any, records: list[RunResult]) -> None:
        self.writer, self.records = writer, records

    def __call__(self, index: int, result: RunResult) -> None:
        self.writer.write(result)
        self.records.append(result)

    def flush(self) -> None:
        self.writer.sync()


def summary(records: list[RunResult], out: Path, model_calls: int) -> str:
    """One line: results by status, how many were cut, and the LLM calls the records count."""
    counts: dict[str, int] = {}
    for result in records:
        counts[result.status.value] = counts.get(result.status.value, 0) + 1
    by_status = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    cut = sum(1 for r in records if r.truncated)
    truncated = f"; [yellow]{cut} truncated (more rows than kept)[/]" if cut else ""
    calls = sum(r.llm_calls for r in records)
    return (
        f"[bold]{len(records)} result(s) written to {out}[/]: {by_status or 'none'}{truncated}; "
        f"{calls} LLM call(s) in the records (a batched call counts once for each of its "
        f"questions; {model_calls} distinct call(s) made)."
    )


def distinct_calls(records: list[RunResult]) -> int:
    """The LLM calls the model received for these results: a batched call shared by several
    questions of a run counts once (each run numbers its calls, across processes and resumes).

    Example:
        >>> from orchestrator.core.result import TraceEntry
        >>> def result(run, *calls):
        ...     trace = [TraceEntry(agent="a", batch=1, llm_call=c, duration_ms=0,
        ...                         input_summary="", output_summary="") for c in calls]
        ...     return RunResult(run_id=run, question=f"{run}{calls}", status="answered",
        ...                      trace=trace, llm_calls=len(calls))
        >>> distinct_calls([result("r1", 1, 2, 3), result("r1", 1, 2, 4), result("r2", 1, 2, 3)])
        7
    """
    return len(
        {
            (record.run_id, entry.llm_call)
            for record in records
            for entry in record.trace
            if entry.llm_call is not None
        }
    )


def batch_exit_code(statuses: list[RunStatus]) -> int:
    """0 when every question ended answered or needing clarification, else
    ``BATCH_INCOMPLETE_EXIT``."""
    from orchestrator.core.result import BATCH_INCOMPLETE_EXIT, BATCH_OK_STATUSES

    return 0 if all(s in BATCH_OK_STATUSES for s in statuses) else BATCH_INCOMPLETE_EXIT


def _distributed(
    questions_file: Path,
    questions: list[str],
    existing: list[dict[str, Any]],
    out: Path,
    writer: Any,
    *,
    db: str | None,
    yes: bool,
    run_size: int,
    timeout: float | None,
    hints: dict[str, str] | None = None,
) -> None:
    """``--distributed``: the batch is recorded in the state database and its runs go to the
    workers; this process decides and writes each run's results from its record."""
    from orchestrator.core.batch_io import FINAL_STATUSES
    from orchestrator.core.result import RunStatus
    from orchestrator.interfaces.cli.batch_distributed import run_distributed

    final = {s.value for s in FINAL_STATUSES}
    kept = {r["question"]: r for r in existing if r.get("status") in final}
    written_pairs = {(str(r.get("run_id")), r["question"]) for r in existing}
    records: list[RunResult] = []
    sink = _Written(writer, records)

    def written(result: RunResult) -> None:
        sink(0, result)

    written.flush = sink.flush  # type: ignore[attr-defined]
    with writer:
        outcome = run_distributed(
            questions_file.read_bytes(),
            questions,
            out=out,
            db=db,
            yes=yes,
            run_size=run_size,
            timeout=timeout,
            kept=kept,
            written=written_pairs,
            write=written,
            hints=hints,
        )
    if outcome.results:
        # The run records are the truth: the file ends holding each of their results once.
        writer.settle(outcome.results, set(outcome.run_ids))
    err.print(
        summary(records, out, distinct_calls(records))
        + f" {outcome.runs} run(s) of batch {outcome.batch_id} on the workers."
    )
    # The exit status covers every question of the file: the batch's results from the run
    # records, and the final results the file held before the batch was recorded.
    answered = {r.question: r.status for r in outcome.results}
    statuses = list(answered.values()) + [
        RunStatus(r["status"]) for q, r in kept.items() if q not in answered
    ]
    raise typer.Exit(batch_exit_code(statuses))


class StageBars:
    """One progress bar per pipeline stage on stderr, and a live line for retries and rate-limit
    waits; paused while the reviewer decides. Without a terminal: plain log lines instead."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.live = err.is_terminal
        self.progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}
        self.line: Any = None  # the task whose description is the live notice line
        self.logged: dict[str, tuple[int, int]] = {}

    def __enter__(self) -> StageBars:
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.progress.stop()

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        if stage == "waiting for approval":
            if self.live:
                self.progress.stop()  # the prompt needs the terminal
            err.print(f"[bold]{total} statement(s) in one approval batch[/]")
            return
        if not self.live:
            if self.logged.get(stage, (-1, -1))[0] != done and (done in (0, total) or not total):
                self.logged[stage] = (done, total)
                err.print(f"{stage}: {done}/{total or '?'}", highlight=False)
            return
        if not self.progress.live.is_started:
            self.progress.start()
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total or None)
        self.progress.update(self.tasks[stage], completed=done, total=total or None)

    def notice(self, message: str) -> None:
        """A retry or a wait: the live line, or one log line without a terminal."""
        if not self.live:
            err.print(f"[yellow]{escape(message)}[/]", highlight=False)
            return
        if self.line is None:
            self.line = self.progress.add_task("", total=None, visible=True)
        self.progress.update(self.line, description=f"[yellow]{message}[/]")

    def limiter_wait(self, seconds: float) -> None:
        self.notice(f"rate limit reached: waiting {seconds:.1f} s for a free slot")
