"""Optional review at the client (``sqlgate mcp --elicit``): when the run pauses at the gate and
the caller's authenticated identity may decide (a reviewer or admin token over HTTP), the server
asks the human at the client, through MCP elicitation, to approve or reject the SQL waiting.

The decision is recorded under the token's actor, never anything the agent passed, and the audit
log marks it as taken at the client (``decided_at_client``, with the token's role), apart from a
review on the reviewer page: it is not evidence a reviewer read the SQL there, and earned
auto-approval must not count it. Stdio has no authentication, so its caller is an analyst and is
never asked. Elicitation needs a back-channel for server-initiated requests (handshake-era
sessions); where there is none, or the person declines, the run simply stays at the gate for a
reviewer elsewhere. Edits are made on the
reviewer page or with ``sqlgate approvals decide``, not here.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from approvals import ApprovalError, AuditEvent
from orchestrator.interfaces.mcp.service import McpService
from orchestrator.interfaces.mcp.views import RunReport
from orchestrator.interfaces.server.auth import Principal

log = logging.getLogger("sqlgate.mcp")


class ReviewAtClient(BaseModel):
    """What the person at the client answers."""

    decision: Literal["approve", "reject"] = Field(
        description="approve: the SQL shown may run, exactly as shown; reject: nothing runs"
    )
    reason: str = Field(default="", max_length=2000, description="Why, when rejecting")


def may_elicit(ctx: Context[Any, Any], principal: Principal, service: McpService) -> bool:
    """Elicitation mode is on, the caller's token may decide, and the client can be asked."""
    if not service.config.elicit or not principal.may("decide"):
        return False
    if ctx.request_context.request is None:  # stdio: no authenticated identity
        return False
    capabilities = ctx.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def review_message(report: RunReport, principal: Principal) -> str:
    lines = [
        f"sqlgate asks {principal.actor} to review the SQL of run {report.run_id} before it runs "
        "(read-only, under the safety policy):",
        "",
    ]
    for number, statement in enumerate(report.waiting, start=1):
        lines += [f"[{number}] {statement.question}", statement.sql, ""]
    lines.append("Approve runs every statement above exactly as shown; reject runs none.")
    return "\n".join(lines)


async def review_at_client(
    ctx: Context[Any, Any], principal: Principal, service: McpService, report: RunReport
) -> bool:
    """Ask the person; True when their decision was recorded (the run then resumes)."""
    if report.review is None or not report.waiting:
        return False
    try:
        answer = await ctx.elicit(review_message(report, principal), ReviewAtClient)
    except MCPError as exc:  # no back-channel for server-initiated requests, or the client failed
        log.info("review at the client not possible: %s", exc)
        return False
    if answer.action != "accept":
        return False
    data = answer.data
    waiting = [s.call_id for s in report.waiting]
    if data.decision == "approve":
        decisions: dict[str, Any] = {cid: "approve" for cid in waiting}
    else:
        reason = data.reason.strip() or f"rejected by {principal.actor} at the client"
        decisions = {cid: {"action": "reject", "reason": reason} for cid in waiting}
    gate = service.pipeline.gate(report.run_id)  # the pipeline's own gate: same store and rules
    batch_id = report.review.batch_id
    try:
        await asyncio.to_thread(
            gate.submit,
            batch_id,
            decisions,
            actor=principal.actor,
            review="at_client",  # answered inside the agent's client: decides, earns no trust
        )
    except ApprovalError as exc:  # decided elsewhere first, expired, ...: the run goes on as is
        log.info("the decision at the client was not applied: %s", exc)
    else:
        marker = AuditEvent(
            at=datetime.now(UTC),
            run_id=report.run_id,
            batch_id=batch_id,
            event="decided_at_client",
            actor=principal.actor,
            detail={
                "via": "mcp elicitation",
                "role": principal.role.value,
                "decision": data.decision,
            },
        )
        await asyncio.to_thread(service.approvals.append_audit, [marker])
    service.hub.poke()
    return True
