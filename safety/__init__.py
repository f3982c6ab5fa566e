"""sqlgate safety: validate model-written SQL on the AST, and run it on read-only connections.

Floor: a library at the bottom, below ``orchestrator``; it imports none of sqlgate's other
packages (only ``sqlgate_exports``), and ``agents`` and ``orchestrator`` build on it.
"""

import typing as _typing

from sqlgate_exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
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
    from .name_rules import NameRules
    from .policy import SafetyPolicy
    from .policy_file import (
        AutoApprovalRules,
        Policy,
        RiskQuorum,
        RiskRules,
        RolePolicy,
        load_policy,
    )
    from .privileges import check_privileges
    from .readonly import ReadOnlySettings, open_readonly_engine
    from .rule_context import RuleContext
    from .rules import RULES
    from .sandbox import QuerySandbox, SandboxRows, sandbox_for
    from .schema_reader import DatabaseSchema, read_schema
    from .statement import ValidatedStatement
    from .validator import SqlValidator

# Exports are imported on first use, so importing the package stays cheap.
_EXPORTS = {
    "AutoApprovalRules": "safety.policy_file",
    "CORRECTABLE_CODES": "safety.codes",
    "DEFAULT_SCHEMAS": "safety.catalog",
    "DIALECTS": "safety.dialects",
    "DatabaseSchema": "safety.schema_reader",
    "FINDING_CODES": "safety.codes",
    "FindingCode": "safety.codes",
    "FindingKind": "safety.codes",
    "FunctionAllowlist": "safety.functions",
    "NameRules": "safety.name_rules",
    "Policy": "safety.policy_file",
    "PolicyError": "safety.errors",
    "QuerySandbox": "safety.sandbox",
    "RULES": "safety.rules",
    "ReadOnlySettings": "safety.readonly",
    "ReadOnlySetupError": "safety.errors",
    "ResourceLimitExceeded": "safety.errors",
    "RiskQuorum": "safety.policy_file",
    "RiskRules": "safety.policy_file",
    "RolePolicy": "safety.policy_file",
    "RuleContext": "safety.rule_context",
    "SafetyError": "safety.errors",
    "SafetyFinding": "safety.models",
    "SafetyPolicy": "safety.policy",
    "SandboxRows": "safety.sandbox",
    "SchemaCatalog": "safety.catalog",
    "SqlValidator": "safety.validator",
    "StatementFailed": "safety.errors",
    "StatementTimeout": "safety.errors",
    "UnregisteredFindingCode": "safety.errors",
    "UnsupportedDialect": "safety.errors",
    "ValidatedStatement": "safety.statement",
    "ValidationResult": "safety.models",
    "check_privileges": "safety.privileges",
    "dialect_for_url": "safety.dialects",
    "is_statement_timeout": "safety.errors",
    "kind_of": "safety.codes",
    "load_policy": "safety.policy_file",
    "open_readonly_engine": "safety.readonly",
    "read_schema": "safety.schema_reader",
    "sandbox_for": "safety.sandbox",
}

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
    "ValidatedStatement",
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


__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS, globals())
