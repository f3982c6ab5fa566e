"""The shape every LLM agent shares: messages in, one pydantic model out, no client.

An LLM agent builds the chat messages for its batch and parses the reply. The orchestrator owns the
client, the rate limiter and retries; an agent never sees any of them, so agents are tested with
plain inputs.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agents.errors import AgentOutputError

OutputT = TypeVar("OutputT", bound=BaseModel)

#: Every LLM agent's ``setting`` name, in pipeline order (settings such as
#: ``SQLGATE_LLM_MAX_TOKENS=sql=400`` are checked against these).
AGENT_SETTINGS = ("reasoning", "sql", "correction", "answer")


def _invalid(schema_name: str, detail: str) -> AgentOutputError:
    error = AgentOutputError(f"the model's reply is not a valid {schema_name}: {detail}")
    error.detail = detail
    return error


@cache
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The output model's JSON schema, built once per model (a class does not change): callers
    read it and never change it."""
    return model.model_json_schema()


@cache
def compact_schema(model: type[BaseModel]) -> str:
    """The output model's JSON schema as one compact line, for prompts and JSON-mode servers."""
    return json.dumps(json_schema(model), separators=(",", ":"), sort_keys=True)


class LLMAgent(Generic[OutputT]):
    """Base class of the batches that call a model.

    Subclasses set ``agents`` (the logical agent names this call serves), ``batch`` (1-4),
    ``setting`` (the name a person uses for it in settings, e.g. ``sql`` in
    ``SQLGATE_LLM_MAX_TOKENS=sql=400``), ``output_model`` and implement ``build_messages``.
    """

    agents: ClassVar[tuple[str, ...]]
    setting: ClassVar[str]
    batch: ClassVar[int]
    output_model: ClassVar[type[BaseModel]]
    instructions: ClassVar[str]

    @property
    def schema_name(self) -> str:
        return self.output_model.__name__

    def system_message(self) -> dict[str, str]:
        return {
            "role": "system",
            "content": (
                f"{self.instructions.strip()}\n\n"
                "Reply with ONE JSON object and nothing else, valid against this JSON schema:\n"
                f"{compact_schema(self.output_model)}"
            ),
        }

    def parse(self, text: str | None) -> OutputT:
        """Parse the model's reply; raise ``AgentOutputError`` naming what was wrong."""
        if not text or not text.strip():
            raise _invalid(self.schema_name, "the reply was empty")
        body = _strip_code_fence(text)
        try:
            return self.output_model.model_validate_json(body)  # type: ignore[return-value]
        except ValidationError as exc:
            raise _invalid(self.schema_name, _first_errors(exc)) from exc


def _strip_code_fence(text: str) -> str:
    r"""Some servers wrap JSON in a Markdown fence even in JSON mode; take what is inside: up to
    the closing fence (what follows it is talk), or to the end when the reply was cut before it.

    Example:
        >>> _strip_code_fence('```json\n{"a": 1}')
        '{"a": 1}'
    """
    stripped = text.strip()
    if not stripped.startswith("```"):
        return stripped
    if "\n" not in stripped:  # ```{"a": 1}``` on one line
        return stripped.lstrip("`").removeprefix("json").rstrip("`").strip()
    lines = stripped.splitlines()[1:]  # the opening fence line, with its language tag
    for end, line in enumerate(lines):
        if line.strip().startswith("```"):
            return "\n".join(lines[:end]).strip()
    return "\n".join(lines).strip()


def _first_errors(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "reply"
        parts.append(f"{where}: {error.get('msg')}")
    more = len(exc.errors()) - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
