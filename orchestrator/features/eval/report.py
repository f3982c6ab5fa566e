"""The eval report: per question and in total, and how it compares with an earlier report.

A report is JSON (``EvalReport.model_dump_json``) so a team can keep the last one and compare the
next run with it (``compare_reports``): a regression is execution accuracy lower by more than the
threshold, and the questions that were right and are not any more are named.

``comparable()`` is the report without what changes from one run to the next of the same
recordings (times, the mode, the date): a recording and its replay give equal comparable reports.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from orchestrator.core.errors import ConfigurationError

__all__ = [
    "APPROVE_ALL",
    "BaselineComparison",
    "EvalQuestion",
    "EvalReport",
    "EvalTotals",
    "REPORT_FORMAT",
    "compare_reports",
    "read_report",
]

REPORT_FORMAT = 1
#: How every statement of an eval was approved, in the report and as the audit log's actor.
APPROVE_ALL = "sqlgate eval --approve-all"

Outcome = Literal["correct", "wrong", "not_answered", "gold_error", "replay_miss"]


class EvalQuestion(BaseModel):
    """One question's run and its score."""

    id: str
    question: str
    db: str = Field(description="The database, its URL without credentials")
    outcome: Outcome = Field(
        description="correct / wrong (answered, another result), not_answered (the run ended "
        "other than answered), gold_error (the gold SQL could not run), replay_miss (the "
        "recording has no reply for a request this run made)"
    )
    status: str = Field(description="The run's status (answered, unsafe, llm_error, ...)")
    error_code: str | None = None
    error: str | None = None
    sql: str | None = Field(default=None, description="The SQL that ran (as approved)")
    gold_sql: str | None = None
    ordered: bool = Field(default=False, description="Compared in order (the gold has ORDER BY)")
    row_count: int | None = None
    gold_row_count: int | None = None
    truncated: bool = Field(default=False, description="A result was cut at the row cap")
    llm_calls: int = 0
    http_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: float = 0.0
    note: str | None = None


class EvalTotals(BaseModel):
    questions: int = 0
    correct: int = 0
    wrong: int = 0
    not_answered: int = 0
    gold_errors: int = 0
    replay_misses: int = 0
    execution_accuracy: float = Field(
        default=0.0, description="correct / (questions - gold_errors)"
    )
    statuses: dict[str, int] = Field(default_factory=dict)
    error_codes: dict[str, int] = Field(default_factory=dict)
    llm_calls: int = 0
    http_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_s: float = 0.0

    @classmethod
    def of(cls, questions: list[EvalQuestion], duration_s: float) -> EvalTotals:
        outcomes = Counter(q.outcome for q in questions)
        scored = len(questions) - outcomes["gold_error"]
        return cls(
            questions=len(questions),
            correct=outcomes["correct"],
            wrong=outcomes["wrong"],
            not_answered=outcomes["not_answered"],
            gold_errors=outcomes["gold_error"],
            replay_misses=outcomes["replay_miss"],
            execution_accuracy=round(outcomes["correct"] / scored, 4) if scored else 0.0,
            statuses=dict(sorted(Counter(q.status for q in questions).items())),
            error_codes=dict(
                sorted(Counter(q.error_code for q in questions if q.error_code).items())
            ),
            llm_calls=sum(q.llm_calls for q in questions),
            http_requests=sum(q.http_requests for q in questions),
            prompt_tokens=sum(q.prompt_tokens for q in questions),
            completion_tokens=sum(q.completion_tokens for q in questions),
            duration_s=round(duration_s, 3),
        )


class EvalReport(BaseModel):
    """What ``sqlgate eval`` measured."""

    format: int = REPORT_FORMAT
    source: str = Field(description="The eval file's name")
    mode: Literal["live", "record", "replay"]
    model: str
    scripted: bool = Field(
        default=False,
        description="The replies came from sqlgate's scripted test server, not a model: the "
        "accuracy is the script's, never a model's",
    )
    approvals: str = Field(
        default=APPROVE_ALL,
        description="Every statement the validator accepted was approved unseen by --approve-all "
        "(recorded so in the audit log); nothing of it was remembered or earns trust",
    )
    started_at: str
    totals: EvalTotals
    questions: list[EvalQuestion]

    def comparable(self) -> dict[str, Any]:
        """The report minus what differs between runs of the same recordings (times, mode)."""
        data = self.model_dump(mode="json", exclude={"mode", "started_at"})
        data["totals"].pop("duration_s")
        for q in data["questions"]:
            q.pop("duration_ms")
        return data


def read_report(path: Path) -> EvalReport:
    """An earlier report (``--baseline``). Raises ``ConfigurationError`` in one sentence."""
    try:
        return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"no such baseline report: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the baseline report {path}: {exc}") from None
    except (ValidationError, json.JSONDecodeError):
        raise ConfigurationError(
            f"{path} is not a report written by sqlgate eval (--out or --json)"
        ) from None


class BaselineComparison(BaseModel):
    """This report against an earlier one."""

    baseline_accuracy: float
    accuracy: float
    threshold: float
    regressed: bool = Field(description="Accuracy fell by more than the threshold")
    newly_wrong: list[str] = Field(description="Ids right in the baseline and not now")
    newly_right: list[str] = Field(description="Ids right now and not in the baseline")
    llm_calls_delta: int
    tokens_delta: int

    def sentence(self) -> str:
        drop = self.baseline_accuracy - self.accuracy
        verdict = (
            f"REGRESSION: execution accuracy fell by {drop:.1%} (more than the {self.threshold:.1%} "
            "allowed)"
            if self.regressed
            else "no regression beyond the threshold"
        )
        return (
            f"{verdict}: {self.baseline_accuracy:.1%} -> {self.accuracy:.1%}; "
            f"{len(self.newly_wrong)} newly wrong, {len(self.newly_right)} newly right; "
            f"LLM calls {self.llm_calls_delta:+d}, tokens {self.tokens_delta:+d}"
        )


def compare_reports(
    report: EvalReport, baseline: EvalReport, threshold: float
) -> BaselineComparison:
    """``report`` against ``baseline``: regressed when accuracy fell by more than ``threshold``
    (a fraction: 0.02 allows two points)."""
    before = {q.id: q.outcome == "correct" for q in baseline.questions}
    now = {q.id: q.outcome == "correct" for q in report.questions}
    drop = baseline.totals.execution_accuracy - report.totals.execution_accuracy
    tokens = lambda t: t.prompt_tokens + t.completion_tokens  # noqa: E731 - one-line helper
    return BaselineComparison(
        baseline_accuracy=baseline.totals.execution_accuracy,
        accuracy=report.totals.execution_accuracy,
        threshold=threshold,
        regressed=drop > threshold + 1e-9,
        newly_wrong=[i for i, ok in now.items() if not ok and before.get(i)],
        newly_right=[i for i, ok in now.items() if ok and i in before and not before[i]],
        llm_calls_delta=report.totals.llm_calls - baseline.totals.llm_calls,
        tokens_delta=tokens(report.totals) - tokens(baseline.totals),
    )
