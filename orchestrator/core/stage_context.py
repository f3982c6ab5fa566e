"""What a stage may use of the pipeline that runs it, and nothing more.

The stages (``orchestrator.core.stages``) are plain functions ``stage(p, ctx, questions)``; ``p``
is typed by one of these protocols, so a stage cannot reach the run's lifecycle (its record,
lease, resume and takeover), and its signature shows what it reads. ``Pipeline`` satisfies both.

- ``ModelCalls``: the LLM client and the configuration (Batch 4 needs no more);
- ``StageContext``: the shared services of a run: the database, the clock, the features' hooks,
  the validator, executor and gate of the run's policy, and where results and reviews go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agents import SQLExecutor
    from approvals import ApprovalGate, Reviewer
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.hooks import RunHooks
    from orchestrator.core.identity import Identity
    from orchestrator.core.llm import LLMClient
    from orchestrator.core.pipeline_config import PipelineConfig
    from orchestrator.core.result_rows import ResultRowStore
    from orchestrator.core.run_context import RunContext
    from safety import Policy, SqlValidator

__all__ = ["ModelCalls", "StageContext"]


class ModelCalls(Protocol):
    """The model and the limits of its calls (``k`` questions per call, prompt size)."""

    @property
    def llm(self) -> LLMClient: ...

    @property
    def config(self) -> PipelineConfig: ...


class StageContext(ModelCalls, Protocol):
    """The services every run shares, as the stages see them."""

    @property
    def db(self) -> TargetDatabase: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def hooks(self) -> RunHooks: ...

    @property
    def reviewer(self) -> Reviewer | None: ...

    @property
    def result_rows(self) -> ResultRowStore | None:
        """Where every kept row of a result goes (the result object holds a preview)."""
        ...

    @property
    def can_wait(self) -> bool:
        """Runs are recorded, so a statement may wait at the gate for more reviewers."""
        ...

    def run_policy(self, ctx: RunContext) -> Policy: ...

    def validator(
        self, policy: Policy | None = None, identity: Identity | None = None
    ) -> SqlValidator: ...

    def executor(self, policy: Policy | None = None) -> SQLExecutor: ...

    def gate(
        self,
        run_id: str,
        validator: SqlValidator | None = None,
        policy: Policy | None = None,
        *,
        database: str | None = None,
        identity: Identity | None = None,
    ) -> ApprovalGate: ...
