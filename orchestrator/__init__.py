"""The pipeline: the only owner of the LLM client, the rate limiter wiring and retries.

Example:
    >>> from orchestrator import RunStatus
    >>> RunStatus.ANSWERED.value
    'answered'
"""

import typing as _typing
from importlib import import_module as _import_module

if _typing.TYPE_CHECKING:
    from orchestrator.config import Settings, parse_rate
    from orchestrator.database import TargetDatabase, redact_url
    from orchestrator.errors import (
        ConfigurationError,
        DatabaseError,
        DatabaseUnreachable,
        DatabaseURLInvalid,
        InvalidQuestion,
        LLMError,
        LLMOutputInvalid,
        LLMRequestRejected,
        LLMUnavailable,
        ReplayMiss,
        SqlgateError,
    )
    from orchestrator.llm import LLMCall, LLMClient, LLMSettings, TokenUsage
    from orchestrator.pipeline import Pipeline, PipelineConfig
    from orchestrator.result import (
        EXIT_CODES,
        ApprovalRecord,
        RunError,
        RunResult,
        RunStatus,
        TraceEntry,
    )

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "ApprovalRecord": "orchestrator.result",
    "ConfigurationError": "orchestrator.errors",
    "DatabaseError": "orchestrator.errors",
    "DatabaseURLInvalid": "orchestrator.errors",
    "DatabaseUnreachable": "orchestrator.errors",
    "EXIT_CODES": "orchestrator.result",
    "InvalidQuestion": "orchestrator.errors",
    "LLMCall": "orchestrator.llm",
    "LLMClient": "orchestrator.llm",
    "LLMError": "orchestrator.errors",
    "LLMOutputInvalid": "orchestrator.errors",
    "LLMRequestRejected": "orchestrator.errors",
    "LLMSettings": "orchestrator.llm",
    "LLMUnavailable": "orchestrator.errors",
    "Pipeline": "orchestrator.pipeline",
    "PipelineConfig": "orchestrator.pipeline",
    "ReplayMiss": "orchestrator.errors",
    "RunError": "orchestrator.result",
    "RunResult": "orchestrator.result",
    "RunStatus": "orchestrator.result",
    "Settings": "orchestrator.config",
    "SqlgateError": "orchestrator.errors",
    "TargetDatabase": "orchestrator.database",
    "TokenUsage": "orchestrator.llm",
    "TraceEntry": "orchestrator.result",
    "parse_rate": "orchestrator.config",
    "redact_url": "orchestrator.database",
}

__all__ = [
    "ApprovalRecord",
    "ConfigurationError",
    "DatabaseError",
    "DatabaseURLInvalid",
    "DatabaseUnreachable",
    "EXIT_CODES",
    "InvalidQuestion",
    "LLMCall",
    "LLMClient",
    "LLMError",
    "LLMOutputInvalid",
    "LLMRequestRejected",
    "LLMSettings",
    "LLMUnavailable",
    "Pipeline",
    "PipelineConfig",
    "ReplayMiss",
    "RunError",
    "RunResult",
    "RunStatus",
    "Settings",
    "SqlgateError",
    "TargetDatabase",
    "TokenUsage",
    "TraceEntry",
    "parse_rate",
    "redact_url",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
