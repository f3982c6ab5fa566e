"""A run's checkpoint: typed, versioned, and readable from every earlier version.

A run that started is written as a ``StartedCheckpoint`` (its questions: enough for another
process to run it again from the start if this one stops before the gate); a run paused at the
approval gate as a ``PausedCheckpoint`` (the questions' state, the statements waiting and the
cycle); a run whose statements ran as an ``ExecutedCheckpoint`` (only the answers are left); a
finished run as a ``FinishedCheckpoint`` (its results).
Each carries ``version``. ``load_checkpoint`` reads any version sqlgate ever wrote and upgrades
it in memory, the way LangGraph versions its checkpoints: a migration is a function from one
version's JSON to the next, listed in ``_UPGRADES`` and never edited once shipped.

    version 1  an untyped dict; pending statements as positional lists [qid, ok, code, message];
               no ``version`` key
    version 2  this module's models: ``kind`` tells started, paused and finished apart, pending
               statements are objects, the safety policy the run was validated under is kept;
               later fields with defaults (a started run's ``hints``, a question's ``hint``) read
               as absent from checkpoints written before them

Example:
    >>> paused = load_checkpoint({"run_id": "r", "dialect": "sqlite", "calls_made": 2,
    ...     "cycle": 1, "batch_id": "b", "pending": {"c1": ["q1", True, None, None]},
    ...     "questions": []})
    >>> paused.version, paused.pending["c1"].question_id
    (2, 'q1')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents import ExecutionResult, ReasoningOutput, SchemaContext
from orchestrator.core.errors import CheckpointError
from orchestrator.core.llm import TokenUsage
from orchestrator.core.result import (
    ApprovalRecord,
    ClarifyingQuestionOut,
    RunError,
    RunResult,
    RunStatus,
    TraceEntry,
)

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "ExecutedCheckpoint",
    "FinishedCheckpoint",
    "PausedCheckpoint",
    "PendingCheckpoint",
    "QuestionCheckpoint",
    "StartedCheckpoint",
    "load_checkpoint",
    "recorded_hints",
]

#: The version this code writes.
CHECKPOINT_VERSION = 2


class QuestionCheckpoint(BaseModel):
    """One question's state, everything needed to carry on in another process."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    qid: str = Field(description="The question's id within its run (q1, q2, ...).")
    text: str = Field(description="The question as asked.")
    hint: str = Field(default="", description="What the asker added to it (``--hint``): none.")
    status: RunStatus | None = Field(default=None, description="Set once the question ended.")
    after_synthesis: RunStatus | None = Field(
        default=None, description="The status the question takes once its answer is written."
    )
    error: RunError | None = None
    reasoning: ReasoningOutput | None = Field(default=None, description="Batch 1's output.")
    db_schema: SchemaContext | None = Field(
        default=None, alias="schema", description="The explored tables."
    )
    data_context: str = ""
    pending_sql: str | None = Field(default=None, description="SQL waiting for the next cycle.")
    agent_sql: bool = Field(
        default=False,
        description="The caller wrote the SQL (MCP submit_sql): no model call plans, fixes or "
        "answers it.",
    )
    sql: str | None = Field(default=None, description="The SQL of the latest cycle.")
    failure: str | None = Field(default=None, description="Why there is no result, for the answer.")
    correction_error: str | None = None
    meta_outcome: str | None = None
    corrections: int = 0
    result: ExecutionResult | None = None
    answer: str | None = None
    assumptions: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    clarification_questions: list[ClarifyingQuestionOut] = Field(default_factory=list)
    approvals: list[ApprovalRecord] = Field(default_factory=list)
    trace: list[TraceEntry] = Field(default_factory=list)
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    calls: list[int] = Field(default_factory=list, description="LLM call indices it took part in.")
    http_requests: int = 0


class PendingCheckpoint(BaseModel):
    """A statement of the cycle the run paused in, with the validator's verdict."""

    question_id: str
    ok: bool = Field(description="The validator accepted it.")
    code: str | None = Field(default=None, description="The refusal's code, when refused.")
    message: str | None = None


class PausedCheckpoint(BaseModel):
    """A run waiting at the approval gate."""

    kind: Literal["paused"] = "paused"
    version: int = CHECKPOINT_VERSION
    run_id: str
    dialect: str
    calls_made: int = Field(description="LLM calls the run made before it paused.")
    cycle: int = Field(description="The approval cycle it paused in (1, 2, 3).")
    batch_id: str
    pending: dict[str, PendingCheckpoint] = Field(description="call_id -> statement.")
    questions: list[QuestionCheckpoint]
    policy: dict[str, Any] | None = Field(
        default=None, description="The safety policy the run's statements were validated under."
    )
    identity: dict[str, Any] | None = Field(
        default=None, description="The asker's attributes the run's row filters are bound to."
    )


class StartedCheckpoint(BaseModel):
    """A run some process is advancing before the gate: what it takes to start it again."""

    kind: Literal["started"] = "started"
    version: int = CHECKPOINT_VERSION
    run_id: str
    questions: list[str]
    statements: list[str] | None = Field(
        default=None,
        description="The caller's own SQL, one per question (then each question is its purpose).",
    )
    hints: list[str] | None = Field(
        default=None,
        description="What the asker added to each question (``--hint``, MCP ``evidence``), one "
        "per question (empty: none); missing in a checkpoint written before hints were kept.",
    )
    policy: dict[str, Any] | None = Field(
        default=None, description="The policy the run is judged under (a role's, if it has one)."
    )
    identity: dict[str, Any] | None = Field(
        default=None, description="The asker's attributes the run's row filters are bound to."
    )


class ExecutedCheckpoint(BaseModel):
    """A run whose approved statements ran: only the answer is left to write. Taking it over
    writes the answers from these results and runs nothing again."""

    kind: Literal["executed"] = "executed"
    version: int = CHECKPOINT_VERSION
    run_id: str
    dialect: str
    calls_made: int
    questions: list[QuestionCheckpoint]
    policy: dict[str, Any] | None = None
    identity: dict[str, Any] | None = None


class FinishedCheckpoint(BaseModel):
    """A run that ended: its results, returned as they are to any later resume."""

    kind: Literal["finished"] = "finished"
    version: int = CHECKPOINT_VERSION
    results: list[RunResult]


def recorded_hints(hints: Sequence[str] | None, questions: int) -> list[str] | None:
    """``hints`` as a started run records them: one per question (stripped, "" for none), or
    None when no question has one.

    Example:
        >>> recorded_hints([" F is female "], 2), recorded_hints(["", " "], 2)
        (['F is female', ''], None)
    """
    kept = [(h or "").strip() for h in list(hints or ())[:questions]]
    kept += [""] * (questions - len(kept))
    return kept if any(kept) else None


Checkpoint = StartedCheckpoint | PausedCheckpoint | ExecutedCheckpoint | FinishedCheckpoint


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    if "results" in data and "questions" not in data:
        return {"kind": "finished", "version": 2, "results": data["results"]}
    pending = {
        call_id: {"question_id": qid, "ok": ok, "code": code, "message": message}
        for call_id, (qid, ok, code, message) in data["pending"].items()
    }
    return {**data, "kind": "paused", "version": 2, "pending": pending}


# version -> the function that turns that version's JSON into the next one's. Append only.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def load_checkpoint(data: dict[str, Any]) -> Checkpoint:
    """Read a checkpoint of any version sqlgate wrote, upgraded to the current models.

    Raises:
        CheckpointError: the data is from a newer sqlgate, or not a checkpoint at all.
    """
    if not isinstance(data, dict):
        raise CheckpointError("a checkpoint must be a JSON object")
    version = int(data.get("version", 1))
    if version > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"the checkpoint is version {version}; this sqlgate reads up to {CHECKPOINT_VERSION}: "
            "upgrade sqlgate"
        )
    while version < CHECKPOINT_VERSION:
        data = _UPGRADES[version](data)
        version += 1
    try:
        if data.get("kind") == "finished":
            return FinishedCheckpoint.model_validate(data)
        if data.get("kind") == "started":
            return StartedCheckpoint.model_validate(data)
        if data.get("kind") == "executed":
            return ExecutedCheckpoint.model_validate(data)
        return PausedCheckpoint.model_validate(data)
    except ValueError as exc:
        raise CheckpointError(f"the checkpoint is not valid: {exc}") from exc
