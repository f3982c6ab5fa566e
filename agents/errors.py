"""Errors raised by the agents.

Every error carries a stable, machine-readable ``code`` (snake_case) for results and scripts.

    AgentError                      base class, code "agent_error"
     ├── SchemaInspectionError      the database could not be inspected
     │                              (code "database_unreachable" or "schema_inspection_failed")
     ├── DescriptionsError          a descriptions file cannot be read (code "invalid_descriptions")
     ├── ExecutionError             a statement failed to run (code "statement_timeout",
     │                              "resource_limit", "dialect_mismatch", "refused_statement",
     │                              "unchecked_statement", "execution_error" or
     │                              "database_unreachable"; ``timed_out`` is
     │                              True for "statement_timeout" and "resource_limit")
     └── AgentOutputError           a model reply did not fit the agent's output model
                                    (code "invalid_output")
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentOutputError",
    "DescriptionsError",
    "ExecutionError",
    "SchemaInspectionError",
]


class AgentError(Exception):
    """Base class of every agent error; ``code`` is stable, ``message`` is for people."""

    code: str = "agent_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class SchemaInspectionError(AgentError):
    """The database's catalogue could not be read."""

    code = "schema_inspection_failed"


class DescriptionsError(AgentError):
    """A descriptions file that cannot be read or is malformed; the message names the key."""

    code = "invalid_descriptions"


class ExecutionError(AgentError):
    """A statement failed; ``timed_out`` is True when it was stopped for its cost (time, or
    memory/CPU/size for "resource_limit"): such a question ends instead of being corrected.

    Example:
        >>> err = ExecutionError("statement_timeout", "canceling statement due to statement timeout", timed_out=True)
        >>> err.code, err.timed_out
        ('statement_timeout', True)
    """

    code = "execution_error"

    def __init__(self, code: str, message: str, timed_out: bool = False) -> None:
        super().__init__(message, code=code)
        self.timed_out = timed_out

    def __repr__(self) -> str:
        return f"ExecutionError(code={self.code!r}, message={self.message!r}, timed_out={self.timed_out!r})"


class AgentOutputError(AgentError):
    """A model reply could not be parsed into the agent's output model."""

    code = "invalid_output"
    detail: str = ""  # what was wrong, without the schema name (for the repair request)
