"""``sqlgate eval``: the user's own questions with their gold SQL (or rows), measured.

Execution accuracy, statuses, LLM calls, tokens and time per question and in total, as a table
on stderr and JSON (``--json`` on stdout, ``--out FILE``); ``--baseline`` compares with an
earlier report and exits 15 on a regression beyond ``--threshold``. ``--record DIR`` keeps the
model's traffic as cassettes, one per question, and ``--replay DIR`` runs from them with no
model, no network and no key, so the questions become a regression test in CI.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.markup import escape

from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import (
    BaseUrlOpt,
    DbOpt,
    JsonOpt,
    ModelOpt,
    PolicyOpt,
    RateOpt,
    TimeoutOpt,
    emit_json,
    err,
    fail,
    fail_with,
)

if TYPE_CHECKING:
    from orchestrator.features.eval.report import BaselineComparison, EvalQuestion, EvalReport

#: ``sqlgate eval`` when the report regressed beyond --threshold against --baseline.
EVAL_REGRESSION_EXIT = 15
#: ``sqlgate eval --replay`` when a question's requests did not match its recording.
EVAL_REPLAY_MISS_EXIT = 16
#: Questions listed one per line in the table at most (the report has them all).
_TABLE_ROWS = 40


def eval_command(
    eval_file: Annotated[
        Path,
        typer.Argument(
            help="Questions with gold_sql or expected_rows: .json, .jsonl or .yaml (or Spider's "
            "dev.json with --db-dir).",
            show_default=False,
        ),
    ],
    approve_all: Annotated[
        bool,
        typer.Option(
            "--approve-all",
            help="Required: run every statement the validator accepts without review (recorded "
            "so in the report and the audit log; it teaches nothing and earns no trust).",
        ),
    ] = False,
    db: DbOpt = None,
    db_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder of SQLite databases named by the questions' 'db' (Spider's database/ "
            "folder: NAME/NAME.sqlite).",
        ),
    ] = None,
    db_id: Annotated[
        list[str] | None,
        typer.Option("--db-id", help="Only the questions of this database name (repeatable)."),
    ] = None,
    per_db: Annotated[
        int | None,
        typer.Option(help="Only the first N questions of each database (after --db-id).", min=1),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(help="Only the first N questions (after --db-id and --per-db).", min=1),
    ] = None,
    record: Annotated[
        Path | None,
        typer.Option(help="Save the model's HTTP traffic as cassettes in DIR (one per question)."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            help="Answer from the cassettes in DIR instead of a model: no network, no API key."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the report (JSON) to FILE.")
    ] = None,
    as_json: JsonOpt = False,
    baseline: Annotated[
        Path | None,
        typer.Option(help="An earlier report to compare with (exit 15 on a regression)."),
    ] = None,
    threshold: Annotated[
        float,
        typer.Option(
            help="Accuracy drop allowed against --baseline, as a fraction (0.02 = two points).",
            min=0.0,
            max=1.0,
        ),
    ] = 0.0,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    rate_limit: RateOpt = None,
    policy: PolicyOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Measure sqlgate on your own questions: execution accuracy, statuses, calls, tokens, time.

    Each question runs alone, as `sqlgate ask` would; its result set is compared with the gold
    SQL's (or expected_rows) as a multiset, in order only when the gold has ORDER BY. Exit 0
    when the eval ran (whatever its accuracy), 2 for bad input, 15 for a regression against
    --baseline, 16 when a replay did not match its recordings.

    Example: sqlgate eval questions.yaml --db sqlite:///shop.db --approve-all --record cassettes/

    In CI: sqlgate eval questions.yaml --db sqlite:///shop.db --approve-all --replay cassettes/
    --baseline last-report.json --threshold 0.02
    """
    from orchestrator.features.eval.cases import load_cases, select_cases
    from orchestrator.features.eval.report import compare_reports, read_report
    from orchestrator.features.eval.runner import resolve_databases

    if not approve_all:
        fail(
            "sqlgate eval runs every statement the validator accepts without review: pass "
            "--approve-all to say so (the report and the audit log record it, and it earns no "
            "trust)",
            as_json=as_json,
            error_code="approval_required",
        )
    if record is not None and replay is not None:
        fail("--record and --replay exclude each other: record once, then replay", as_json=as_json)
    try:
        cases = load_cases(eval_file)
        cases = select_cases(cases, db_ids=db_id, per_db=per_db, limit=limit)
        urls = resolve_databases(cases, db, db_dir)
        earlier = read_report(baseline) if baseline is not None else None
        if out is not None and not out.parent.is_dir():
            fail(f"cannot write the report to {out}: no folder {out.parent}", as_json=as_json)
        report = _run(
            cases,
            urls,
            eval_file.name,
            record=record,
            replay=replay,
            model=model,
            base_url=base_url,
            rate_limit=rate_limit,
            policy=policy,
            timeout=timeout,
            as_json=as_json,
        )
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        return
    comparison = compare_reports(report, earlier, threshold) if earlier is not None else None
    if out is not None:
        _write_report(out, report, as_json=as_json)
    if as_json:
        payload: dict[str, Any] = report.model_dump(mode="json")
        if comparison is not None:
            payload["baseline"] = comparison.model_dump(mode="json")
        emit_json(payload)
    show_report(report, comparison)
    if report.totals.replay_misses:
        raise typer.Exit(EVAL_REPLAY_MISS_EXIT)
    if comparison is not None and comparison.regressed:
        raise typer.Exit(EVAL_REGRESSION_EXIT)


def _run(
    cases: list[Any],
    urls: dict[str, str],
    source: str,
    *,
    record: Path | None,
    replay: Path | None,
    model: str | None,
    base_url: str | None,
    rate_limit: str | None,
    policy: Path | None,
    timeout: float | None,
    as_json: bool,
) -> EvalReport:
    """Settings and files first (what a person fixes first), then the model, then the run."""
    from orchestrator.core.config import Settings, parse_rate
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.result_rows import ResultRowStore
    from orchestrator.core.state_db import default_state_url, state_errors
    from orchestrator.features.eval.runner import EvalRun, QuestionCassettes
    from orchestrator.interfaces.cli.common import policy_with
    from orchestrator.wiring import run_hooks, state_database

    settings = Settings.from_env({**os.environ, "SQLGATE_POLICY": ""})
    settings.policy = policy_with(policy)
    if rate_limit:
        settings.rate_limit, settings.rate_window_s = parse_rate(rate_limit)
    if timeout is not None:
        settings.statement_timeout_s = timeout
    cassettes: QuestionCassettes | None = None
    if replay is not None:
        from orchestrator.features.eval.replay import replay_client

        llm, cassettes = replay_client(replay, settings.llm, model=model)
    else:
        if record is not None:
            from orchestrator.features.eval.cassettes import CassetteRecorder

            cassettes = CassetteRecorder(record)
        llm = _live(settings, model, base_url)

    def open_database(url: str) -> TargetDatabase:
        return TargetDatabase(
            url,
            policy=settings.policy,
            statement_timeout_s=settings.statement_timeout_s,
            descriptions=settings.descriptions,
        )

    state = state_database(default_state_url())
    with state_errors(state.safe_url):
        state.approvals.setup()
    mode: Literal["live", "record", "replay"] = (
        "replay" if replay is not None else "record" if record is not None else "live"
    )
    with tempfile.TemporaryDirectory(prefix="sqlgate-eval-") as spool:
        rows = ResultRowStore(f"sqlite:///{spool}/rows.sqlite")
        with QuestionBar(len(cases)) as bar:
            run = EvalRun(
                llm=llm,
                open_database=open_database,
                approvals=state.approvals,
                result_rows=rows,
                mode=mode,
                cassettes=cassettes,
                on_question=bar,
                hooks=run_hooks(),  # never memory: nothing is learned from approvals nobody saw
            )
            try:
                return run.run(cases, urls, source)
            finally:
                rows.close()


def _live(settings: Any, model: str | None, base_url: str | None) -> Any:
    from orchestrator.core.limits import build_limiter
    from orchestrator.core.llm import LLMClient

    settings.llm.model = model or settings.llm.model
    settings.llm.base_url = base_url or settings.llm.base_url
    settings.require_credentials()
    return LLMClient(settings.llm, limiter=build_limiter(settings, mode="wait"))


def _write_report(out: Path, report: EvalReport, *, as_json: bool) -> None:
    """The report to ``out``, whole or not at all."""
    partial = out.parent / f".{out.name}.partial"
    try:
        partial.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
        os.replace(partial, out)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        fail(f"cannot write the report to {out}: {exc}", as_json=as_json, error_code="output_error")
    err.print(f"report written to {escape(str(out))}")


class QuestionBar:
    """One progress bar over the questions on stderr (accuracy so far in its label); without a
    terminal, a line at every tenth of the way."""

    def __init__(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.total = total
        self.correct = 0
        self.live = err.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        )
        self.task = self.progress.add_task("questions", total=total)
        self.step = max(1, total // 10)

    def __enter__(self) -> QuestionBar:
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.progress.stop()

    def __call__(self, done: int, total: int, line: EvalQuestion) -> None:
        self.correct += line.outcome == "correct"
        label = f"questions ({self.correct}/{done} correct)"
        if self.live:
            self.progress.update(self.task, completed=done, description=label)
        elif done % self.step == 0 or done == total:
            err.print(f"{done}/{total} questions, {self.correct} correct", highlight=False)


_OUTCOME_STYLE = {
    "correct": "green",
    "wrong": "red",
    "not_answered": "yellow",
    "gold_error": "magenta",
    "replay_miss": "red",
}


def show_report(report: EvalReport, comparison: BaselineComparison | None) -> None:
    """The report as tables on stderr: totals, statuses, and the questions (the wrong first)."""
    from rich.table import Table

    t = report.totals
    scripted = (
        " [bold yellow](scripted replies, not a model: the accuracy is the script's)[/]"
        if report.scripted
        else ""
    )
    err.print(
        f"[bold]sqlgate eval[/] {escape(report.source)}: {report.mode}, model "
        f"{escape(report.model)}{scripted}; approvals: {escape(report.approvals)}"
    )
    totals = Table(title="Totals", show_header=False)
    totals.add_row("execution accuracy", f"[bold]{t.execution_accuracy:.1%}[/]")
    totals.add_row(
        "questions",
        f"{t.questions}: {t.correct} correct, {t.wrong} wrong, {t.not_answered} not answered, "
        f"{t.gold_errors} gold error(s), {t.replay_misses} replay miss(es)",
    )
    totals.add_row("statuses", ", ".join(f"{k} {v}" for k, v in t.statuses.items()))
    if t.error_codes:
        totals.add_row("error codes", ", ".join(f"{k} {v}" for k, v in t.error_codes.items()))
    totals.add_row("LLM calls", f"{t.llm_calls} ({t.http_requests} HTTP request(s))")
    totals.add_row(
        "tokens",
        f"{t.prompt_tokens + t.completion_tokens} ({t.prompt_tokens} prompt, "
        f"{t.completion_tokens} completion)",
    )
    totals.add_row("time", f"{t.duration_s:.1f} s")
    err.print(totals)
    shown = sorted(report.questions, key=lambda q: q.outcome == "correct")
    table = Table(
        title="Questions"
        if len(shown) <= _TABLE_ROWS
        else f"Questions (first {_TABLE_ROWS}, the wrong first)"
    )
    for name in ("id", "db", "outcome", "status", "calls", "tokens", "ms"):
        table.add_column(name, justify="right" if name in ("calls", "tokens", "ms") else "left")
    for q in shown[:_TABLE_ROWS]:
        style = _OUTCOME_STYLE[q.outcome]
        table.add_row(
            escape(q.id),
            escape(q.db.rsplit("/", 1)[-1]),
            f"[{style}]{q.outcome}[/]",
            escape(q.status + (f" ({q.error_code})" if q.error_code else "")),
            str(q.llm_calls),
            str(q.prompt_tokens + q.completion_tokens),
            f"{q.duration_ms:.0f}",
        )
    err.print(table)
    if comparison is not None:
        style = "bold red" if comparison.regressed else "green"
        err.print(f"[{style}]{escape(comparison.sentence())}[/]")
        if comparison.newly_wrong:
            err.print("newly wrong: " + escape(", ".join(comparison.newly_wrong)))
