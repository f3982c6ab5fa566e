"""sqlgate safety: validate model-written SQL on the AST, and run it on read-only connections."""

from .dialects import DIALECTS, dialect_for_url
from .errors import (
    ReadOnlySetupError,
    ResourceLimitExceeded,
    SafetyError,
    StatementFailed,
    StatementTimeout,
    UnsupportedDialect,
    is_statement_timeout,
)
from .functions import FunctionAllowlist
from .models import SafetyFinding, ValidationResult
from .policy import SafetyPolicy
from .privileges import check_privileges
from .readonly import ReadOnlySettings, open_readonly_engine
from .rules import RULES, RuleContext
from .sandbox import QuerySandbox, SandboxRows, sandbox_for
from .validator import SqlValidator

__all__ = [
    "DIALECTS",
    "FunctionAllowlist",
    "QuerySandbox",
    "RULES",
    "ReadOnlySettings",
    "ReadOnlySetupError",
    "ResourceLimitExceeded",
    "RuleContext",
    "SafetyError",
    "SafetyFinding",
    "SafetyPolicy",
    "SandboxRows",
    "SqlValidator",
    "StatementFailed",
    "StatementTimeout",
    "UnsupportedDialect",
    "ValidationResult",
    "check_privileges",
    "dialect_for_url",
    "is_statement_timeout",
    "open_readonly_engine",
    "sandbox_for",
]
