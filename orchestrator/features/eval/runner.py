"""Run an eval: each question through the pipeline, its result against the gold, a report.

Every question is its own run (as ``sqlgate ask`` would make it), so each one's LLM calls,
tokens and time are its own and its recording is its own cassette. Every statement the
validator accepts is approved by ``ApproveAll`` under the actor ``sqlgate eval --approve-all``:
the audit log says so, the vote is ``unseen`` (it vouches for nothing) and the pipeline has no
memory (nothing is remembered, retrieved or earned: a replay sends what was recorded).

The gold SQL goes through the same safety validator and read-only executor as the model's SQL
(a LIMIT added, ``SELECT *`` expanded); a gold statement the policy refuses is a ``gold_error``
for that question, never run around the validator.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from orchestrator.core.errors import SqlgateError
from orchestrator.features.eval.cases import EvalCase, EvalFileError
from orchestrator.features.eval.compare import gold_is_ordered, same_result
from orchestrator.features.eval.report import (
    APPROVE_ALL,
    EvalQuestion,
    EvalReport,
    EvalTotals,
)

if TYPE_CHECKING:
    from approvals import ApprovalStore
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.hooks import RunHooks
    from orchestrator.core.llm import LLMClient
    from orchestrator.core.result import RunResult
    from orchestrator.core.result_rows import ResultRowStore

__all__ = ["EvalRun", "QuestionCassettes", "database_url", "resolve_databases"]


class QuestionCassettes(Protocol):
    """Where each question's model traffic is recorded or replayed from (``CassetteRecorder``,
    ``CassetteReplay``): ``scripted`` once a reply came from sqlgate's scripted server, ``miss``
    after a question whose replay did not match its recording."""

    scripted: bool
    miss: str | None

    def question(self, case_id: str) -> AbstractContextManager[None]: ...


#: Told after each question: (questions done, questions in all, that question's line).
OnQuestion = Callable[[int, int, EvalQuestion], object]


def database_url(case: EvalCase, default: str | None, db_dir: Path | None) -> str:
    """The URL of the database ``case`` is asked of: its own ``db`` (a URL, or a name under
    ``db_dir`` in Spider's layout ``NAME/NAME.sqlite`` or as ``NAME.sqlite``), else ``default``.
    Raises ``EvalFileError`` naming the question."""
    if case.db is None:
        if default is None:
            raise EvalFileError(f"question {case.id!r} names no database and no --db was given")
        return default
    if "://" in case.db:
        return case.db
    if db_dir is None:
        raise EvalFileError(
            f"question {case.id!r} names the database {case.db!r}: pass --db-dir, the folder "
            "that holds it (Spider's database/ folder)"
        )
    for candidate in (db_dir / case.db / f"{case.db}.sqlite", db_dir / f"{case.db}.sqlite"):
        if candidate.is_file():
            return f"sqlite:///{candidate.resolve()}"
    raise EvalFileError(
        f"question {case.id!r}: no database {case.db!r} in {db_dir} "
        f"(looked for {case.db}/{case.db}.sqlite and {case.db}.sqlite)"
    )


def resolve_databases(
    cases: list[EvalCase], default: str | None, db_dir: Path | None
) -> dict[str, str]:
    """Every question's database URL, by question id, checked before any model call."""
    return {case.id: database_url(case, default, db_dir) for case in cases}


@dataclass
class EvalRun:
    """The questions of one eval file, asked through ``llm``, scored against their gold.

    ``open_database(url)`` opens each database once (read-only, under the command's policy);
    ``approvals`` keeps the batches and the audit log (the state database's store);
    ``cassettes`` records or replays each question's model traffic (None: live, unrecorded);
    ``hooks`` are the features the runs use (``orchestrator.wiring.run_hooks()``: never memory,
    since nothing is learned from approvals nobody saw; None: the same, ``standalone_hooks``).
    """

    llm: LLMClient
    open_database: Callable[[str], TargetDatabase]
    approvals: ApprovalStore | None
    result_rows: ResultRowStore
    mode: Literal["live", "record", "replay"] = "live"
    cassettes: QuestionCassettes | None = None
    on_question: OnQuestion | None = None
    clock: Callable[[], float] = time.perf_counter
    hooks: RunHooks | None = None
    _databases: dict[str, TargetDatabase] = field(default_factory=dict)
    _pipelines: dict[str, Any] = field(default_factory=dict)

    def run(self, cases: list[EvalCase], urls: dict[str, str], source: str) -> EvalReport:
        started_at = datetime.now(UTC).isoformat(timespec="seconds")
        started = self.clock()
        lines: list[EvalQuestion] = []
        try:
            for url in dict.fromkeys(urls[case.id] for case in cases):
                self._pipeline(url)  # every database opened before the first model call
            for case in cases:
                line = self._one(case, urls[case.id])
                lines.append(line)
                if self.on_question is not None:
                    self.on_question(len(lines), len(cases), line)
        finally:
            for database in self._databases.values():
                database.dispose()
        return EvalReport(
            source=source,
            mode=self.mode,
            model=self.llm.settings.model,
            scripted=self.cassettes is not None and self.cassettes.scripted,
            approvals=APPROVE_ALL,
            started_at=started_at,
            totals=EvalTotals.of(lines, self.clock() - started),
            questions=lines,
        )

    # -- one question ------------------------------------------------------------------------------

    def _pipeline(self, url: str) -> tuple[TargetDatabase, Any]:
        if url not in self._pipelines:
            from approvals import ApproveAll
            from orchestrator.core.pipeline import Pipeline, PipelineConfig
            from orchestrator.features.standalone import standalone_hooks

            database = self.open_database(url)
            self._databases[url] = database
            self._pipelines[url] = Pipeline(
                database,
                self.llm,
                ApproveAll(),
                config=PipelineConfig(admission=False),
                approval_store=self.approvals,
                result_rows=self.result_rows,
                hooks=self.hooks if self.hooks is not None else standalone_hooks(),
                actor=APPROVE_ALL,
            )
        return self._databases[url], self._pipelines[url]

    def _scope(self, case_id: str) -> AbstractContextManager[None]:
        return self.cassettes.question(case_id) if self.cassettes is not None else nullcontext()

    def _one(self, case: EvalCase, url: str) -> EvalQuestion:
        database, pipeline = self._pipeline(url)
        result: RunResult | None = None
        failure: SqlgateError | None = None
        with self._scope(case.id):
            try:
                result = pipeline.ask(case.question)
            except SqlgateError as exc:  # the run could not start (e.g. the question is refused)
                failure = exc
        line = EvalQuestion(
            id=case.id,
            question=case.question,
            db=database.safe_url,
            outcome="not_answered",
            status="invalid_input" if failure is not None else "",
            gold_sql=case.gold_sql,
        )
        if failure is not None or result is None:
            line.error_code = failure.code if failure else None
            line.error = failure.message if failure else None
            return line
        line.status = result.status.value
        line.error_code = result.error.code if result.error else None
        line.error = result.error.message if result.error else None
        line.sql = result.sql
        line.row_count = result.row_count
        line.truncated = result.truncated
        line.llm_calls = result.llm_calls
        line.http_requests = result.http_requests
        line.prompt_tokens = result.tokens.prompt
        line.completion_tokens = result.tokens.completion
        line.duration_ms = round(result.duration_ms, 1)
        miss = self.cassettes.miss if self.cassettes is not None else None
        if miss:
            line.outcome, line.note = "replay_miss", miss
            return line
        gold = self._gold(case, database, line)
        if gold is None:
            return line
        if result.status.value != "answered" or result.sql is None:
            line.outcome = "not_answered"
            return line
        header = self.result_rows.header(result.run_id, "q1")
        got = list(self.result_rows.rows(result.run_id, "q1")) if header is not None else []
        line.outcome = "correct" if same_result(got, gold, ordered=line.ordered) else "wrong"
        if line.truncated:
            line.note = "a result was cut at the row cap: the rows kept were compared"
        return line

    def _gold(
        self, case: EvalCase, database: TargetDatabase, line: EvalQuestion
    ) -> list[list[Any]] | None:
        """The gold rows (noting the order rule on ``line``), or None with ``gold_error``."""
        if case.expected_rows is not None:
            line.ordered = case.ordered
            line.gold_row_count = len(case.expected_rows)
            return case.expected_rows
        assert case.gold_sql is not None
        validator = database.validator()
        checked = validator.validate(case.gold_sql)
        if not checked.ok:
            refusal = checked.refusal
            line.outcome = "gold_error"
            line.note = "the gold SQL was refused by the safety policy: " + (
                refusal.message if refusal else "no reason given"
            )
            return None
        line.ordered = gold_is_ordered(case.gold_sql, database.dialect)
        try:
            gold = database.executor().run(checked, row_limit=validator.row_limit)
        except Exception as exc:  # ExecutionError and the drivers' own: the gold cannot run
            line.outcome = "gold_error"
            line.note = f"the gold SQL failed: {getattr(exc, 'message', None) or exc}"
            return None
        line.gold_row_count = gold.row_count
        line.truncated = line.truncated or gold.truncated
        return gold.rows
