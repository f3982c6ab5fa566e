"""The orchestrator's exceptions. Each has a stable ``code`` that becomes a run's error code.

    SqlgateError
     ├── ConfigurationError        config_error          (missing credentials, bad option)
     ├── InvalidQuestion           invalid_input         (empty or oversized question)
     ├── DatabaseError
     │    ├── DatabaseURLInvalid   invalid_database_url
     │    └── DatabaseUnreachable  database_unreachable
     └── LLMError
          ├── LLMUnavailable       llm_unavailable       (connection, timeout, 429/5xx after retries)
          ├── LLMRequestRejected   llm_request_rejected  (401, 403, 404, 400 ...: not retried)
          ├── LLMOutputInvalid     invalid_model_output  (invalid JSON, also after one repair)
          └── ReplayMiss           replay_miss           (no recorded reply for a request)

The other packages keep their own trees (``safety.errors``, ``ratelimit.errors``,
``approvals.errors``); the pipeline turns every one of them into a run status.
"""

from __future__ import annotations


class SqlgateError(Exception):
    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(SqlgateError):
    code = "config_error"


class InvalidQuestion(SqlgateError):
    code = "invalid_input"


class DatabaseError(SqlgateError):
    code = "database_error"


class DatabaseURLInvalid(DatabaseError):
    code = "invalid_database_url"


class DatabaseUnreachable(DatabaseError):
    code = "database_unreachable"


class LLMError(SqlgateError):
    code = "llm_error"


class LLMUnavailable(LLMError):
    code = "llm_unavailable"


class LLMRequestRejected(LLMError):
    code = "llm_request_rejected"


class LLMOutputInvalid(LLMError):
    code = "invalid_model_output"


class ReplayMiss(LLMError):
    code = "replay_miss"
