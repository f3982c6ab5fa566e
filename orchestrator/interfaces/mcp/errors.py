"""Why an MCP tool call did not answer. Every refusal is a tool error (``isError``) whose
structured content is ``{"error": {"code": ..., "message": ..., ...}}``; every tool's declared
``outputSchema`` is the union of its answer and this shape (``with_error_shape``), so a client
that validates structured content (the TypeScript SDK, the Inspector) accepts the error and the
agent reads its code.

    SqlgateError
     └── ToolRefusal               one stable code per reason:
          argument_refused         a decision, an approval or an identity passed as a tool argument
          unknown_argument         any other argument the tool's schema does not declare
          invalid_arguments        an argument of the wrong type or size (``errors``: each field)
          unknown_tool             no tool of that name
          not_cancellable          the run is not waiting at the gate (still planning, running
                                   its approved SQL, or ended): only a waiting run is cancelled
          no_rows                  the question kept no rows (nothing ran, or it failed)
          unauthenticated          an HTTP request without a known bearer token
          forbidden                the caller's role may not use this tool
          invalid_input            neither question nor questions (sql nor statements), an empty
                                   or too long one, answers that match no clarifying question
          run_not_found            no such run of the caller's
          awaiting_approval        the run waits for a reviewer (wait_for_run timed out)
          still_running            the run has not reached the gate or its end yet
          unsafe                   the validator refused the SQL (``reason``)
          rate_limited             the model budget is used up for now (``retry_after``)
          rejected, needs_clarification, execution_failed, timed_out, llm_error,
          database_error, invalid_input, cancelled, run_failed   as a run's status says
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.core.errors import SqlgateError

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
        orchestrator.interfaces.mcp.errors.ToolRefusal: ask takes no approval decision or identity (approved): ...
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


class ErrorBody(BaseModel):
    """What went wrong: a stable ``code``, one sentence, and details that depend on the code."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="Stable error code: unsafe, rejected, rate_limited, ...")
    message: str = Field(description="One sentence saying why")
    reason: str | None = Field(default=None, description="The refusal's reason (unsafe, rejected)")
    retry_after: float | None = Field(default=None, description="Seconds to wait (rate_limited)")
    run: dict[str, Any] | None = Field(default=None, description="The run as it is now")


class ToolErrorResult(BaseModel):
    """The structured content of every tool error."""

    error: ErrorBody


def with_error_shape(schema: dict[str, Any] | None) -> dict[str, Any]:
    """A tool's output schema widened to "the answer, or ``{"error": ...}``" (an object root
    with ``anyOf``, as MCP requires an object at the root).

    Example:
        >>> union = with_error_shape({"type": "object", "properties": {"n": {"type": "integer"}},
        ...                           "required": ["n"]})
        >>> [sorted(option.get("required", [])) for option in union["anyOf"]]
        [['n'], ['error']]
    """
    answer = copy.deepcopy(schema or {"type": "object"})
    defs = dict(answer.pop("$defs", {}))
    error = ToolErrorResult.model_json_schema(ref_template="#/$defs/{model}")
    defs.update(error.pop("$defs", {}))
    answer.pop("title", None)
    error.pop("title", None)
    union: dict[str, Any] = {
        "type": "object",
        "anyOf": [answer, error],
    }
    if defs:
        union["$defs"] = defs
    return union
