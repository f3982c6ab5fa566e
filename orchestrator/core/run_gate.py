"""A run's approval gate: the reviewer, the store, the policy's approval rules and risk levels.

``risk_approval(policy)`` is the rule of each risk level (reviewers needed, levels an
auto-approval may approve), from the policy's ``[risk]`` section. Each statement's level comes
from the ``assess`` hook (the risk feature: the planner's estimate and what it reads); without
it, ``unassessed`` fails closed: a policy that names sensitive columns makes every statement its
``sensitive`` level (reading one cannot be ruled out), any other its ``no_estimate`` level.

Example:
    >>> from approvals import ApprovalItem
    >>> from safety import Policy
    >>> policy = Policy.from_toml_text('[risk]\\nsensitive_columns = ["client.ssn"]')
    >>> unassessed(policy)(ApprovalItem.new(question_id="q1", question="?", sql="SELECT 1")).level
    'high'
    >>> risk_approval(policy).quorum_for("high")
    2
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from approvals import ApprovalGate, ApprovalItem, RiskApproval, StatementRisk

if TYPE_CHECKING:
    from approvals import ApprovalStore, Reviewer
    from approvals.gate import Assess
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.hooks import HookHost, RunHooks
    from orchestrator.core.identity import Identity
    from orchestrator.core.pipeline_config import PipelineConfig
    from safety import Policy, SqlValidator

__all__ = ["open_gate", "risk_approval", "unassessed"]

#: Why a statement's risk is the policy's fallback level.
NOT_ASSESSED = "no risk estimate was taken (no risk assessment is installed)"


def risk_approval(policy: Policy) -> RiskApproval:
    """The gate's rule per level from the policy's ``[risk]`` section."""
    rules = policy.risk
    return RiskApproval(quorum=rules.quorum.model_dump(), auto_levels=frozenset(rules.auto_approve))


def unassessed(policy: Policy) -> Assess:
    """The gate's ``assess`` when no feature estimates risk: the level that cannot be wrong in
    the reviewer's favour (see the module's docstring)."""
    rules = policy.risk
    level = rules.sensitive if rules.sensitive_columns else rules.no_estimate

    def assess(item: ApprovalItem) -> StatementRisk:
        return StatementRisk(level=level, reasons=[NOT_ASSESSED], row_cap=policy.row_cap)

    return assess


def open_gate(
    host: HookHost,
    *,
    hooks: RunHooks,
    run_id: str,
    validator: SqlValidator,
    policy: Policy,
    reviewer: Reviewer | None,
    store: ApprovalStore | None,
    actor: str,
    authors: Sequence[str],
    config: PipelineConfig,
    database: str | None = None,
    identity: Identity | None = None,
) -> ApprovalGate:
    """The approval gate of run ``run_id`` under ``policy`` (the run's); ``database`` is the
    run's recorded database, which earned auto-approval looks its evidence up under;
    ``identity`` the asker's attributes, which the batch records so that edits are validated
    with them."""
    db: TargetDatabase = host.db
    earned = hooks.earned_approval(host, policy, database) if hooks.earned_approval else None
    assess: Callable[[TargetDatabase, Policy], Assess] | None = hooks.assess
    return ApprovalGate(
        reviewer=reviewer,
        validate=validator.validate,
        policy=earned,
        store=store,
        run_id=run_id,
        actor=actor,
        # dialect and policy: a reviewer in another process validates edits alike
        context=db.gate_context(policy, identity),
        quorum=config.approval_quorum,
        assess=assess(db, policy) if assess is not None else unassessed(policy),
        risk_approval=risk_approval(policy),
        authors=authors,
        four_eyes=policy.approvals.four_eyes,
        ttl=timedelta(seconds=config.approval_ttl_s) if config.approval_ttl_s else None,
        on_expiry=config.on_expiry,
    )
