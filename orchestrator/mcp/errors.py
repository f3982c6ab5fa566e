"""Why an MCP tool call did not answer. Every refusal is a tool error (``isError``) whose
structured content is ``{"error": {"code": ..., "message": ..., ...}}``.

    SqlgateError
     └── ToolRefusal               one stable code per reason:
          argument_refused         a decision, an approval or an identity passed as a tool argument
          unknown_argument         any other argument the tool's schema does not declare
          unauthenticated          an HTTP request without a known bearer token
          forbidden                the caller's role may not use this tool
          invalid_input            neither question nor questions, or an empty one
          run_not_found            no such run of the caller's
          awaiting_approval        the run waits for a reviewer (wait_for_run timed out)
          still_running            the run has not reached the gate or its end yet
          unsafe                   the validator refused the SQL (``reason``)
          rate_limited             the model budget is used up for now (``retry_after``)
          rejected, needs_clarification, execution_failed, timed_out, llm_error,
          database_error, invalid_input, cancelled, run_failed   as a run's status says
"""

from __future__ import annotations

from typing import Any

from orchestrator.errors import SqlgateError

#: Argument names that would carry a decision or an identity: never accepted from an agent.
DECISION_ARGUMENTS = frozenset(
    {
        "actor",
        "approve",
        "approved",
        "approved_by",
        "approver",
        "as_reviewer",
        "auto_approve",
        "decided_by",
        "decision",
        "decisions",
        "identity",
        "on_behalf_of",
        "reject",
        "reviewer",
        "role",
        "token",
        "user",
        "yes",
    }
)


class ToolRefusal(SqlgateError):
    """A tool call that ends without an answer; ``details`` go into the structured error."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.details = {k: v for k, v in details.items() if v is not None}

    def payload(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}


def refuse_arguments(tool: str, given: set[str], declared: set[str]) -> None:
    """Raise ``ToolRefusal`` when ``given`` has a name the tool does not declare.

    Example:
        >>> refuse_arguments("ask", {"question", "approved"}, {"question", "questions"})
        Traceback (most recent call last):
        ...
        orchestrator.mcp.errors.ToolRefusal: ask takes no approval decision or identity (approved): ...
    """
    extra = sorted(given - declared)
    if not extra:
        return
    names = ", ".join(extra)
    if any(name.lower() in DECISION_ARGUMENTS for name in extra):
        raise ToolRefusal(
            "argument_refused",
            f"{tool} takes no approval decision or identity ({names}): an agent can never "
            "approve SQL; a reviewer decides with their own credentials, outside this server",
            arguments=extra,
        )
    raise ToolRefusal(
        "unknown_argument",
        f"{tool} has no argument {names}; it takes: {', '.join(sorted(declared)) or 'none'}",
        arguments=extra,
    )
