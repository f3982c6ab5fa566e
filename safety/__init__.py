"""sqlgate safety: validate model-written SQL on the AST, and run it on read-only connections."""

from .access import NameRules
from .catalog import DEFAULT_SCHEMAS, SchemaCatalog
from .codes import CORRECTABLE_CODES, FINDING_CODES, FindingCode, FindingKind, kind_of
from .dialects import DIALECTS, dialect_for_url
from .errors import (
    PolicyError,
    ReadOnlySetupError,
    ResourceLimitExceeded,
    SafetyError,
    StatementFailed,
    StatementTimeout,
    UnregisteredFindingCode,
    UnsupportedDialect,
    is_statement_timeout,
)
from .functions import FunctionAllowlist
from .models import SafetyFinding, ValidationResult
from .policy import SafetyPolicy
from .policy_file import AutoApprovalRules, Policy, RiskQuorum, RiskRules, RolePolicy, load_policy
from .privileges import check_privileges
from .readonly import ReadOnlySettings, open_readonly_engine
from .rules import RULES, RuleContext
from .sandbox import QuerySandbox, SandboxRows, sandbox_for
from .schema_reader import DatabaseSchema, read_schema
from .validator import SqlValidator

__all__ = [
    "AutoApprovalRules",
    "CORRECTABLE_CODES",
    "DEFAULT_SCHEMAS",
    "DIALECTS",
    "DatabaseSchema",
    "FINDING_CODES",
    "FindingCode",
    "FindingKind",
    "FunctionAllowlist",
    "NameRules",
    "Policy",
    "PolicyError",
    "QuerySandbox",
    "RULES",
    "ReadOnlySettings",
    "ReadOnlySetupError",
    "ResourceLimitExceeded",
    "RiskQuorum",
    "RiskRules",
    "RolePolicy",
    "RuleContext",
    "SafetyError",
    "SafetyFinding",
    "SafetyPolicy",
    "SandboxRows",
    "SchemaCatalog",
    "SqlValidator",
    "StatementFailed",
    "StatementTimeout",
    "UnregisteredFindingCode",
    "UnsupportedDialect",
    "ValidationResult",
    "check_privileges",
    "dialect_for_url",
    "is_statement_timeout",
    "kind_of",
    "load_policy",
    "open_readonly_engine",
    "read_schema",
    "sandbox_for",
]
