"""The pipeline: the only owner of the LLM client, the rate limiter wiring and retries.

Example:
    >>> from orchestrator import RunStatus
    >>> RunStatus.ANSWERED.value
    'answered'
"""

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
