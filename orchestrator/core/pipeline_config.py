"""``PipelineConfig``: how runs are carried out (corrections, batching, parallelism, approval
deadlines and quorum, leases, admission). Kept apart from the pipeline so that configuration
(``orchestrator.core.config``) can hold one without importing the pipeline; ``orchestrator.core.pipeline``
exports it too."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.core.lease import DEFAULT_LEASE_S

__all__ = ["PipelineConfig"]


#: Characters a question may have by default: every entry point (CLI, HTTP, MCP) refuses a
#: longer one before a run is created, with the pipeline's own check behind them.
MAX_QUESTION_CHARS = 2000


class PipelineConfig(BaseModel):
    """How runs are carried out. What a query may read and how much (tables, columns, LIMIT,
    row cap, timeout, ``SELECT *``) is the database's policy (``TargetDatabase.policy``)."""

    model_config = ConfigDict(extra="forbid")  # a limit set here by mistake is an error, not lost

    max_corrections: int = Field(default=2, ge=0, le=2, description="self-corrections per question")
    max_question_chars: int = Field(
        default=MAX_QUESTION_CHARS, ge=1, description="characters a question may have"
    )
    preview_rows: int = Field(default=20, ge=0, description="rows kept in the result object")
    k: int = Field(default=10, ge=1, description="questions per LLM call at most")
    max_prompt_chars: int = Field(
        default=60_000, ge=1000, description="a batched prompt is split before it grows past this"
    )
    parallelism: int = Field(default=4, ge=1, description="queries executed at once")
    approval_ttl_s: float | None = Field(
        default=None,
        gt=0,
        description="a batch not decided within this many seconds gets on_expiry",
    )
    on_expiry: Literal["reject", "approve"] = Field(
        default="reject", description="what a deadline does"
    )
    approval_quorum: int = Field(default=1, ge=1, description="distinct reviewers needed per batch")
    lease_s: float = Field(
        default=DEFAULT_LEASE_S,
        gt=0,
        description="how long a process's claim on a run lasts without renewal (heartbeats renew "
        "it every third); a stopped process's runs are taken over after this",
    )
    admission: bool = Field(
        default=False,
        description="refuse a run up front when its worst-case LLM requests do not fit the rate "
        "limit now (fail-fast limiters), instead of stopping half-way",
    )
