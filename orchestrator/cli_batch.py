"""``sqlgate batch``: a file of questions, batched LLM calls, ONE approval, results streamed out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli_common import (
    BaseUrlOpt,
    DbOpt,
    MaxLimitOpt,
    ModelOpt,
    RateOpt,
    RowCapOpt,
    TimeoutOpt,
    YesOpt,
    err,
    fail,
    open_target,
    reviewer_for,
)
from orchestrator.errors import SqlgateError
from orchestrator.result import RunResult


def batch(
    questions_file: Annotated[
        Path,
        typer.Argument(
            help="Questions: .txt (one per line), .csv (a 'question' column) or .jsonl."
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
    rate_limit: RateOpt = None,
    fail_fast: Annotated[
        bool,
        typer.Option("--fail-fast", help="Stop when the rate limit is reached instead of waiting."),
    ] = False,
    row_cap: RowCapOpt = 1000,
    max_limit: MaxLimitOpt = 1000,
    timeout: TimeoutOpt = None,
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
    interruption: questions already answered are skipped.

    Example: sqlgate batch questions.txt --db sqlite:///shop.db --out results.jsonl

    Scaled out: SQLGATE_BROKER_URL=redis://queue:6379/1 SQLGATE_STATE_URL=postgresql+psycopg://...
    sqlgate batch questions.txt --db URL --out results.jsonl --distributed --yes
    """
    from orchestrator.batch_io import ResultWriter, pending_questions, read_questions
    from orchestrator.pipeline import Pipeline, PipelineConfig

    try:
        questions = read_questions(questions_file)
        writer = ResultWriter(out)
        done = writer.resume()
    except SqlgateError as exc:
        fail(exc.message, error_code=exc.code)
        return
    todo = list(pending_questions(questions, done))
    err.print(
        f"{len(questions)} question(s) in {questions_file}; {len(done)} already answered in {out}; "
        f"{len(todo)} to go."
    )
    if not todo:
        raise typer.Exit(0)
    if distributed:
        _distributed(todo, out, writer, db=db, yes=yes, run_size=run_size or k, timeout=timeout)
        return
    run_size = run_size or 1000
    # About four characters a token; half the context for the questions' part of a prompt.
    config = PipelineConfig(
        row_cap=row_cap, max_limit=max_limit, k=k, max_prompt_chars=max(1000, context_tokens * 2)
    )
    reviewer = reviewer_for(yes, as_json=False)
    database, llm = open_target(
        db=db,
        model=model,
        base_url=base_url,
        rate_limit=rate_limit,
        wait=not fail_fast,
        timeout=timeout,
        as_json=False,
    )
    counts: dict[str, int] = {}

    def written(index: int, result: RunResult) -> None:
        writer.write(result)
        counts[result.status.value] = counts.get(result.status.value, 0) + 1

    with writer, StageBars() as bars:
        pipeline = Pipeline(database, llm, reviewer, config=config, progress=bars)
        for start in range(0, len(todo), run_size):
            pipeline.run_batch([q for _, q in todo[start : start + run_size]], on_result=written)
    database.dispose()
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    err.print(
        f"[bold]{sum(counts.values())} result(s) written to {out}[/]: {summary}; {llm.calls} LLM call(s)."
    )


def _distributed(
    todo: list[tuple[int, str]],
    out: Path,
    writer: Any,
    *,
    db: str | None,
    yes: bool,
    run_size: int,
    timeout: float | None,
) -> None:
    """``--distributed``: the runs go to the workers; this process decides and writes."""
    from orchestrator.cli_batch_distributed import run_distributed

    counts: dict[str, int] = {}

    def written(result: RunResult) -> None:
        writer.write(result)
        counts[result.status.value] = counts.get(result.status.value, 0) + 1

    questions = [q for _, q in todo]
    chunks = [questions[start : start + run_size] for start in range(0, len(questions), run_size)]
    with writer:
        runs = run_distributed(chunks, out=out, db=db, yes=yes, timeout=timeout, write=written)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    err.print(
        f"[bold]{sum(counts.values())} result(s) written to {out}[/]: {summary}; "
        f"{runs} run(s) on the workers."
    )


class StageBars:
    """One progress bar per pipeline stage, on stderr; paused while the reviewer decides."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description:<22}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> StageBars:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        if stage == "waiting for approval":
            self.progress.stop()  # the prompt needs the terminal
            err.print(f"[bold]{total} statement(s) in one approval batch[/]")
            return
        if not self.progress.live.is_started:
            self.progress.start()
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total or None)
        self.progress.update(self.tasks[stage], completed=done, total=total or None)
