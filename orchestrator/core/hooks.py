"""``RunHooks``: the seams where a feature meets a run, each an optional function.

The core calls a hook at a stage boundary when one is set, and does without it when not, so a
pipeline runs with no feature at all (``RunHooks()``). The features build their hooks and the
composition root (``orchestrator.wiring``) adds them up for each pipeline:

==================  ================================  =============================================
hook                called                            gives
==================  ================================  =============================================
``answered``        before Batch 1, per question      context from a follow-up's settled answers
``notes``           before Batch 1                    qid -> business notes for the prompt
``vocabulary``      before Batch 1, large schemas     the analysts' words for tables (``Usage``)
``examples``        before Batch 2                    qid -> reviewed (question, SQL) pairs
``assess``          before review, per statement      the statement's risk (``StatementRisk``)
``before_review``   before review, per cycle          findings added to the statements shown
``earned_approval`` when the run's gate is built      an auto-approval policy earned by reviews
``after_execution`` after execution                   (records the statements that ran)
``after_rejection`` after review                      (records the statements rejected)
==================  ================================  =============================================

A hook is given the ``HookHost`` (the pipeline's database, reviewer and the run's policy), never
the pipeline itself. ``a | b`` combines two sets: the hooks that report (``after_*``) and
``before_review`` run both, ``notes`` and ``examples`` merge, and a hook that answers one
question (``assess``, ``vocabulary``, ...) may be set by one side only.

Example:
    >>> hooks = RunHooks(answered=lambda text: "") | RunHooks(notes=lambda host, qs: {})
    >>> hooks.answered is not None and hooks.notes is not None and hooks.examples is None
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agents.linking import Usage
    from approvals import ApprovalGate, ApprovalItem, ApprovalOutcome, ItemFinding
    from approvals.gate import Assess
    from approvals.policy import Policy as ApprovalPolicy
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.question import PendingStatement, QuestionState
    from orchestrator.core.run_context import RunContext
    from safety import Policy

__all__ = ["HookHost", "Ran", "RunHooks"]


class HookHost(Protocol):
    """What a hook may read of the pipeline that calls it."""

    @property
    def db(self) -> TargetDatabase: ...

    @property
    def reviewer(self) -> object: ...

    def run_policy(self, ctx: RunContext) -> Policy: ...


#: A statement that ran: its question, the outcome that approved it and its call_id.
Ran = tuple["QuestionState", "ApprovalOutcome", str]

ByQuestion = Callable[[HookHost, Sequence["QuestionState"]], Mapping[str, Sequence[str]]]
Examples = Callable[[HookHost, Sequence["QuestionState"]], Mapping[str, Sequence[tuple[str, str]]]]
AfterExecution = Callable[[HookHost, "RunContext", Sequence[Ran], "ApprovalGate"], None]
AfterRejection = Callable[
    [HookHost, "RunContext", Mapping[str, "PendingStatement"], "ApprovalOutcome", "ApprovalGate"],
    None,
]
BeforeReview = Callable[
    [HookHost, "RunContext", Sequence["ApprovalItem"]], Mapping[str, Sequence["ItemFinding"]]
]
EarnedApproval = Callable[[HookHost, "Policy", "str | None"], "ApprovalPolicy | None"]
AssessFor = Callable[["TargetDatabase", "Policy"], "Assess"]


@dataclass(frozen=True)
class RunHooks:
    """The features' functions at a run's stage boundaries; None: nothing happens there."""

    answered: Callable[[str], str] | None = None
    notes: ByQuestion | None = None
    vocabulary: Callable[[HookHost], Usage | None] | None = None
    examples: Examples | None = None
    assess: AssessFor | None = None
    before_review: BeforeReview | None = None
    earned_approval: EarnedApproval | None = None
    after_execution: AfterExecution | None = None
    after_rejection: AfterRejection | None = None

    def __or__(self, other: RunHooks) -> RunHooks:
        merged: dict[str, object] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if mine is None or theirs is None:
                merged[f.name] = mine if theirs is None else theirs
            elif f.name in _COMBINED:
                merged[f.name] = _COMBINED[f.name](mine, theirs)
            else:
                raise ValueError(f"two features set the {f.name!r} hook: keep one")
        return RunHooks(**merged)  # type: ignore[arg-type]  # each field from its own field


def _both(first: Callable[..., None], second: Callable[..., None]) -> Callable[..., None]:
    def both(*args: object) -> None:
        first(*args)
        second(*args)

    return both


def _merged(
    first: Callable[..., Mapping[str, Sequence[object]]],
    second: Callable[..., Mapping[str, Sequence[object]]],
) -> Callable[..., Mapping[str, Sequence[object]]]:
    def merged(*args: object) -> Mapping[str, Sequence[object]]:
        out = {key: list(values) for key, values in first(*args).items()}
        for key, values in second(*args).items():
            out.setdefault(key, []).extend(values)
        return out

    return merged


Combine = Callable[[Callable[..., Any], Callable[..., Any]], Callable[..., Any]]

#: How two features' hooks of one kind make one: reports run both, per-question lists merge.
_COMBINED: dict[str, Combine] = {
    "notes": _merged,
    "examples": _merged,
    "before_review": _merged,
    "after_execution": _both,
    "after_rejection": _both,
}
