"""The pipeline: the only owner of the LLM client, the rate limiter wiring and retries.

Floors: ``orchestrator`` stands on the four libraries (``safety``, ``agents``, ``approvals``,
``ratelimit``), which never import it; inside, ``interfaces`` (CLI, servers, worker) import
``features`` and ``core``, ``features`` import ``core``, and ``core`` imports neither.

Example:
    >>> from orchestrator import RunStatus
    >>> RunStatus.ANSWERED.value
    'answered'
"""

import typing as _typing

from sqlgate_exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from orchestrator.core.config import Settings, parse_rate
    from orchestrator.core.database import TargetDatabase, redact_url
    from orchestrator.core.errors import (
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
    from orchestrator.core.llm import LLMCall, LLMClient, LLMSettings, TokenUsage
    from orchestrator.core.pipeline import Pipeline, PipelineConfig
    from orchestrator.core.result import (
        EXIT_CODES,
        ApprovalRecord,
        RunError,
        RunResult,
        RunStatus,
        TraceEntry,
    )

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "ApprovalRecord": "orchestrator.core.result",
    "ConfigurationError": "orchestrator.core.errors",
    "DatabaseError": "orchestrator.core.errors",
    "DatabaseURLInvalid": "orchestrator.core.errors",
    "DatabaseUnreachable": "orchestrator.core.errors",
    "EXIT_CODES": "orchestrator.core.result",
    "InvalidQuestion": "orchestrator.core.errors",
    "LLMCall": "orchestrator.core.llm",
    "LLMClient": "orchestrator.core.llm",
    "LLMError": "orchestrator.core.errors",
    "LLMOutputInvalid": "orchestrator.core.errors",
    "LLMRequestRejected": "orchestrator.core.errors",
    "LLMSettings": "orchestrator.core.llm",
    "LLMUnavailable": "orchestrator.core.errors",
    "Pipeline": "orchestrator.core.pipeline",
    "PipelineConfig": "orchestrator.core.pipeline",
    "ReplayMiss": "orchestrator.core.errors",
    "RunError": "orchestrator.core.result",
    "RunResult": "orchestrator.core.result",
    "RunStatus": "orchestrator.core.result",
    "Settings": "orchestrator.core.config",
    "SqlgateError": "orchestrator.core.errors",
    "TargetDatabase": "orchestrator.core.database",
    "TokenUsage": "orchestrator.core.llm",
    "TraceEntry": "orchestrator.core.result",
    "parse_rate": "orchestrator.core.config",
    "redact_url": "orchestrator.core.database",
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


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
