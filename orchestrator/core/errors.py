"""The orchestrator's exceptions. Each has a stable ``code`` that becomes a run's error code.

    SqlgateError
     ├── ConfigurationError        config_error          (missing credentials, bad option)
     │    └── MissingExtra         missing_extra         (an optional stack is not installed)
     ├── InvalidQuestion           invalid_input         (empty or oversized question)
     ├── RunNotFound               run_not_found         (no such run in the state database)
     ├── RunConflict               run_conflict          (another process changed the run first)
     ├── WrongDatabase             wrong_database        (the run belongs to another database)
     ├── CheckpointError           checkpoint_invalid    (a checkpoint this code cannot read)
     ├── StateDatabaseError        state_database_error  (the state database cannot be used: exit 10)
     ├── DatabaseError
     │    ├── DatabaseURLInvalid   invalid_database_url
     │    └── DatabaseUnreachable  database_unreachable
     └── LLMError
          ├── LLMUnavailable       llm_unavailable       (connection, 429/5xx after retries)
          │    └── LLMTimeout      llm_timeout           (no reply within SQLGATE_LLM_TIMEOUT, every try)
          ├── LLMRequestRejected   llm_request_rejected  (401, 403, 404, 400 ...: not retried)
          ├── LLMOutputInvalid     invalid_model_output  (invalid JSON, also after one repair)
          │    └── LLMOutputCut    model_output_cut      (the reply stopped at max_tokens)
          └── ReplayError          replay_error          (a cassette unreadable, a replay off script)
               └── ReplayMiss      replay_miss           (no recorded reply for a request)

The other packages keep their own trees (``safety.errors``, ``ratelimit.errors``,
``approvals.errors``); the pipeline turns every one of them into a run status.
"""

from __future__ import annotations


class SqlgateError(Exception):
    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RunNotFound(SqlgateError):
    code = "run_not_found"


class RunConflict(SqlgateError):
    code = "run_conflict"


class WrongDatabase(SqlgateError):
    """A run was to be claimed, resumed or recovered by a process serving another database."""

    code = "wrong_database"


class CheckpointError(SqlgateError):
    code = "checkpoint_invalid"


class StateDatabaseError(SqlgateError):
    code = "state_database_error"


class ConfigurationError(SqlgateError):
    code = "config_error"


class MissingExtra(ConfigurationError):
    """``what`` needs an optional stack that is not installed: the sentence names the extra."""

    code = "missing_extra"

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(
            f"{what} needs the {extra} extra, which is not installed: "
            f"pip install 'sqlgate[{extra}]'"
        )
        self.extra = extra


class InvalidQuestion(SqlgateError):
    code = "invalid_input"


class DatabaseError(SqlgateError):
    code = "database_error"


class DatabaseURLInvalid(DatabaseError):
    code = "invalid_database_url"


class DatabaseUnreachable(DatabaseError):
    code = "database_unreachable"


class DialectMismatch(DatabaseError):
    """SQL checked in one dialect was to be judged or run on an engine of another."""

    code = "dialect_mismatch"


class LLMError(SqlgateError):
    """A logical model call failed; it still cost ``http_requests`` and the tokens the server
    reported for the replies it did send (``prompt_tokens``, ``completion_tokens``), and had a
    ``call_index``.

    ``ends_run`` is True when every later call would fail the same way (the endpoint is down
    after all retries, or it refuses our key or model): the run then stops at once, every
    unfinished question ending with this error, instead of asking again question by question.
    """

    code = "llm_error"
    call_index: int | None = None
    http_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: float = 0.0
    ends_run: bool = False


class LLMUnavailable(LLMError):
    code = "llm_unavailable"
    ends_run = True


class LLMTimeout(LLMUnavailable):
    """No reply came within the request timeout, on every attempt."""

    code = "llm_timeout"


class LLMRequestRejected(LLMError):
    code = "llm_request_rejected"


class LLMOutputInvalid(LLMError):
    code = "invalid_model_output"


class LLMOutputCut(LLMOutputInvalid):
    """The reply stopped at its token cap (``finish_reason: length``) before it was whole: asking
    to repair it would be cut the same way, so it is not asked."""

    code = "model_output_cut"


class ReplayError(LLMError):
    """A cassette could not be read, or a replay did not go as recorded."""

    code = "replay_error"


class ReplayMiss(ReplayError):
    """A request has no unplayed recorded interaction that matches it."""

    code = "replay_miss"
