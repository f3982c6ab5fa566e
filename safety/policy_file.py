"""The policy file: one TOML file that configures what every entry point may read.

A policy holds the table and column lists, the ``SELECT *`` handling, the row and time limits,
and per-role sections that can only narrow the base policy (a role's allow lists must be subsets
of the base's, its deny lists add to the base's, its limits can only be lower). A batch stores
``policy.model_dump()`` (or the ``fingerprint()``) so a later edit is judged under the same
policy: ``Policy.model_validate(dump)`` gives it back.

Entries: tables ``table`` or ``schema.table``; columns ``column``, ``table.column`` or
``schema.table.column`` (see ``safety.access`` for how entries without a schema match).

Example:
    >>> policy = Policy.from_toml_text('''
    ... select_star = "expand"
    ... max_limit = 500
    ... statement_timeout = 10
    ...
    ... [tables]
    ... allow = ["customers", "orders", "sales.invoices"]
    ... deny = ["audit_log"]
    ...
    ... [columns]
    ... deny = ["customers.email", "sales.invoices.card_number"]
    ...
    ... [roles.analyst]
    ... tables.allow = ["orders"]
    ... max_limit = 100
    ...
    ... [auto_approval]
    ... enabled = true
    ... min_approvals = 3
    ... min_reviewers = 2
    ... max_age_days = 30
    ... ''')
    >>> analyst = policy.for_role("analyst")
    >>> analyst.tables.allow, analyst.max_limit, analyst.columns.deny
    (('orders',), 100, ('customers.email', 'sales.invoices.card_number'))
    >>> analyst.safety_policy().allowed_tables
    ('orders',)
    >>> policy.auto_approval.enabled, policy.auto_approval.max_age_days
    (True, 30.0)
    >>> Policy.model_validate(policy.model_dump()).fingerprint() == policy.fingerprint()
    True
    >>> Policy.from_toml_text('[auto_approval]\\nmin_reviewers = 0')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    safety.errors.PolicyError: invalid policy: auto_approval.min_reviewers: Input should be ...
    >>> Policy.from_toml_text('[tables]\\nallow = ["a.b.c"]')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    safety.errors.PolicyError: invalid policy: tables.allow: 'a.b.c' is not a valid entry ...
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import PolicyError
from .mask_kinds import MASKS
from .name_rules import split_entry
from .policy import SafetyPolicy
from .result_budget import DEFAULT_MAX_RESULT_BYTES

__all__ = [
    "AutoApprovalRules",
    "ColumnRules",
    "Policy",
    "RiskQuorum",
    "RiskRules",
    "RolePolicy",
    "TableRules",
    "load_policy",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
#: A database role name sqlgate will quote into ``SET LOCAL ROLE``.
_ROLE_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
#: An environment variable name.
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class TableRules(BaseModel):
    """``[tables]``: which tables may be read."""

    model_config = _STRICT

    allow: tuple[str, ...] | None = Field(
        default=None, description="When set, only these tables (table or schema.table) may be read."
    )
    deny: tuple[str, ...] = Field(default=(), description="Tables that may never be read.")

    @field_validator("allow", "deny", mode="before")
    @classmethod
    def _as_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("allow", "deny", mode="after")
    @classmethod
    def _entries(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for entry in value or ():
            split_entry(entry, 2)
        return value


class ColumnRules(BaseModel):
    """``[columns]``: which columns may be referenced."""

    model_config = _STRICT

    allow: tuple[str, ...] | None = Field(
        default=None,
        description="When set, only these columns (column, table.column, schema.table.column) may be read.",
    )
    deny: tuple[str, ...] = Field(default=(), description="Columns that may never be read.")
    mask: dict[str, str] = Field(
        default_factory=dict,
        description='Column entry -> mask ("email", "last4", "null", "redact"): shown only through '
        "the mask, used nowhere its value would leak (safety.masking).",
    )
    mask_aggregates: tuple[str, ...] | None = Field(
        default=None,
        description='Aggregates a masked column may stand in (["count_distinct"] by default).',
    )

    @field_validator("mask", mode="after")
    @classmethod
    def _masks(cls, value: dict[str, str]) -> dict[str, str]:
        for entry, kind in value.items():
            split_entry(entry, 3)
            if kind not in MASKS:
                raise ValueError(f"{entry}: {kind!r} is not a mask (one of {', '.join(MASKS)})")
        return value

    @field_validator("mask_aggregates", mode="before")
    @classmethod
    def _aggregates_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("allow", "deny", mode="before")
    @classmethod
    def _as_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("allow", "deny", mode="after")
    @classmethod
    def _entries(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for entry in value or ():
            split_entry(entry, 3)
        return value


StarMode = Literal["expand", "refuse", "reject"]


class AutoApprovalRules(BaseModel):
    """``[auto_approval]``: when reviews earn a statement's template auto-approval (off by default).

    A statement is auto-approved when its template, on the same schema and safety policy, was
    approved ``min_approvals`` times by ``min_reviewers`` distinct reviewers in the last
    ``max_age_days`` days, never rejected or revoked since, and it reads no column those
    approvals did not. The gate reads these fields (``approvals.EarnedApprovalRule``).
    """

    model_config = _STRICT

    enabled: bool = Field(default=False, description="Earned auto-approval is on.")
    min_approvals: int = Field(default=3, ge=1, description="Approvals of the template needed.")
    min_reviewers: int = Field(default=2, ge=1, description="Distinct reviewers among them.")
    max_age_days: float = Field(
        default=90.0, gt=0, description="Only approvals this recent count, in days."
    )
    envelope: Literal["limit", "values"] = Field(
        default="limit",
        description="What earned trust covers beyond the template: 'limit' (a LIMIT never above "
        "the reviewed one) or 'values' (also numbers within the reviewed range and strings "
        "among the reviewed ones).",
    )

    @field_validator("max_age_days", mode="before")
    @classmethod
    def _days(cls, value: object) -> object:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


RiskLevelName = Literal["low", "medium", "high"]


class RiskQuorum(BaseModel):
    """``[risk.quorum]``: distinct reviewers a batch needs when it holds a statement of a level."""

    model_config = _STRICT

    low: int = Field(default=1, ge=1, description="Reviewers for a low-risk statement.")
    medium: int = Field(default=1, ge=1, description="Reviewers for a medium-risk statement.")
    high: int = Field(default=2, ge=1, description="Reviewers for a high-risk statement.")


class RiskRules(BaseModel):
    """``[risk]``: how a statement's estimate and reads make its risk level, and each level's rule.

    A statement starts ``low``; each fact below raises it to the level named (set a fact's level
    to ``"low"`` to ignore it). ``high`` is never auto-approved.
    """

    model_config = _STRICT

    sensitive_columns: tuple[str, ...] = Field(
        default=(),
        description="Columns (column, table.column, schema.table.column) whose reading is sensitive.",
    )
    sensitive: RiskLevelName = Field(default="high", description="Level when one is read.")
    medium_rows: int | None = Field(
        default=None, ge=1, description="Rows expected at or above this make it medium."
    )
    high_rows: int | None = Field(
        default=None, ge=1, description="Rows expected at or above this make it high."
    )
    full_scan: RiskLevelName = Field(
        default="medium", description="Level when the plan reads a table from end to end."
    )
    row_cap_cut: RiskLevelName = Field(
        default="medium", description="Level when the expected rows exceed the row cap."
    )
    no_estimate: RiskLevelName = Field(
        default="medium", description="Level when the planner gave no estimate (error, timeout)."
    )
    quorum: RiskQuorum = Field(default_factory=RiskQuorum, description="Reviewers per level.")
    auto_approve: tuple[RiskLevelName, ...] = Field(
        default=("low", "medium"),
        description="Levels an auto-approval policy (earned or static) may approve; never high.",
    )

    @field_validator("sensitive_columns", "auto_approve", mode="before")
    @classmethod
    def _as_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("sensitive_columns", mode="after")
    @classmethod
    def _entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            split_entry(entry, 3)
        return value

    @field_validator("auto_approve", mode="after")
    @classmethod
    def _never_high(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if "high" in value:
            raise ValueError("high-risk statements are never auto-approved")
        return value


class ApprovalRules(BaseModel):
    """``[approvals]``: who may decide.

    ``four_eyes``: the author of a batch's SQL (who asked for it, an agent that submitted it, a
    reviewer whose edit re-opened it) may not decide it; another reviewer must.
    """

    model_config = _STRICT

    four_eyes: bool = Field(
        default=False, description="Refuse an author's decision on their own batch."
    )


class RolePolicy(BaseModel):
    """``[roles.<name>]``: narrows the base policy for the questions of one role."""

    model_config = _STRICT

    tables: TableRules = Field(default_factory=TableRules, description="Narrower table lists.")
    rows: dict[str, str] = Field(
        default_factory=dict,
        description="Table entry -> predicate with {user.x} placeholders: the table is read only "
        "through it, for the asker's attributes (safety.row_filters).",
    )
    columns: ColumnRules = Field(default_factory=ColumnRules, description="Narrower column lists.")
    select_star: StarMode | None = Field(
        default=None, description="'refuse' to refuse SELECT * for this role (it cannot widen)."
    )
    max_limit: int | None = Field(default=None, ge=1, description="A lower LIMIT cap.")
    row_cap: int | None = Field(default=None, ge=1, description="A lower row cap.")
    max_result_bytes: int | None = Field(
        default=None, ge=1024, description="A lower byte budget on one result."
    )
    statement_timeout: float | None = Field(
        default=None, gt=0, description="A shorter statement timeout, in seconds."
    )
    database_role: str | None = Field(
        default=None,
        pattern=_ROLE_NAME,
        description="PostgreSQL: the database role this role's statements run as (SET LOCAL ROLE "
        "inside each read-only transaction), so the database's grants and row-level security "
        "apply; the login must be a member of it.",
    )
    database_url_env: str | None = Field(
        default=None,
        pattern=_ENV_NAME,
        description="MySQL/MariaDB (or any engine): the environment variable holding the URL of "
        "this role's own login to the same database (URLs carry passwords, so never the file).",
    )

    @field_validator("statement_timeout", mode="before")
    @classmethod
    def _seconds(cls, value: object) -> object:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Policy(BaseModel):
    """The whole policy file; ``for_role`` narrows it, ``safety_policy`` feeds the validator."""

    model_config = _STRICT

    tables: TableRules = Field(default_factory=TableRules, description="Which tables may be read.")
    rows: dict[str, str] = Field(
        default_factory=dict,
        description="Table entry -> predicate with {user.x} placeholders: the table is read only "
        "through it, for the asker's attributes (safety.row_filters).",
    )
    columns: ColumnRules = Field(
        default_factory=ColumnRules, description="Which columns may be referenced."
    )
    select_star: StarMode = Field(
        default="expand",
        description="SELECT *: 'expand' to the allowed columns (default) or 'refuse' ('reject').",
    )
    max_limit: int = Field(
        default=1000, ge=1, description="LIMIT added when missing, lowered above."
    )
    row_cap: int = Field(default=1000, ge=1, description="Rows fetched from the database at most.")
    max_result_bytes: int = Field(
        default=DEFAULT_MAX_RESULT_BYTES,
        ge=1024,
        description="Bytes of rows one result may hold (64 MiB): rows are streamed and the result "
        "is cut, like at the row cap, at the row that would pass it.",
    )
    statement_timeout: float = Field(
        default=30.0, gt=0, description="Seconds a statement may run before it is stopped."
    )
    allow_system_tables: bool = Field(
        default=False, description="Allow catalog tables (pg_catalog, information_schema, ...)."
    )
    extra_functions: tuple[str, ...] = Field(
        default=(), description="Functions allowed on top of the dialect's allowlist."
    )
    denied_functions: tuple[str, ...] = Field(
        default=(), description="Functions refused on top of the built-in denylist."
    )
    database_role: str | None = Field(
        default=None,
        pattern=_ROLE_NAME,
        description="PostgreSQL: the database role statements run as (SET LOCAL ROLE "
        "inside each read-only transaction), so the database's grants and row-level security "
        "apply; the login must be a member of it.",
    )
    database_url_env: str | None = Field(
        default=None,
        pattern=_ENV_NAME,
        description="MySQL/MariaDB (or any engine): the environment variable holding the URL of "
        "the login statements run as to the same database (URLs carry passwords, so never the file).",
    )
    roles: dict[str, RolePolicy] = Field(
        default_factory=dict, description="Per-role sections; each can only narrow the base policy."
    )
    auto_approval: AutoApprovalRules = Field(
        default_factory=AutoApprovalRules,
        description="Earned auto-approval from reviewed-SQL memory (off by default).",
    )
    risk: RiskRules = Field(
        default_factory=RiskRules,
        description="Risk levels from the engine's estimate and the columns read, and their rules.",
    )
    approvals: ApprovalRules = Field(
        default_factory=ApprovalRules, description="Who may decide (four eyes)."
    )

    @field_validator("extra_functions", "denied_functions", mode="before")
    @classmethod
    def _as_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("statement_timeout", mode="before")
    @classmethod
    def _seconds(cls, value: object) -> object:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @classmethod
    def from_toml_text(cls, text: str) -> Policy:
        """Parse a policy from TOML text; one ``PolicyError`` naming the key when malformed."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise PolicyError(f"invalid policy: not valid TOML ({error})") from None
        return cls.from_data(data)

    @classmethod
    def from_data(cls, data: object) -> Policy:
        """Validate plain data (TOML tables, a stored ``model_dump()``) into a policy."""
        try:
            policy = cls.model_validate(data) if isinstance(data, dict) else None
        except ValidationError as error:
            first = error.errors()[0]
            key = ".".join(str(part) for part in first["loc"]) or "(top level)"
            message = first["msg"].removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                message = "unknown key"
            elif first["type"] == "tuple_type":
                message = 'must be a list of strings, e.g. ["orders", "customers"]'
            raise PolicyError(f"invalid policy: {key}: {message}", key=key) from None
        if policy is None:
            raise PolicyError("invalid policy: the top level must be a table of keys")
        _allows_something(policy, "")
        for name in policy.roles:
            # a role that widens the base, or leaves nothing to read, is refused when it loads
            _allows_something(policy.for_role(name), f"roles.{name}.")
        return policy

    def for_role(self, name: str | None) -> Policy:
        """The policy for questions of role ``name`` (the base policy itself for None).

        Raises ``PolicyError`` for an unknown role or a role that would widen the base.
        """
        if name is None:
            return self
        role = self.roles.get(name)
        if role is None:
            raise PolicyError(f"invalid policy: roles.{name}: no such role", key=f"roles.{name}")
        return self.model_copy(
            update={
                "tables": TableRules(
                    allow=_narrow(
                        self.tables.allow, role.tables.allow, f"roles.{name}.tables.allow"
                    ),
                    deny=_union(self.tables.deny, role.tables.deny),
                ),
                "columns": ColumnRules(
                    allow=_narrow(
                        self.columns.allow, role.columns.allow, f"roles.{name}.columns.allow"
                    ),
                    deny=_union(self.columns.deny, role.columns.deny),
                    # a role adds masks; where both mask a column, the stricter one shows
                    mask=_masks_union(self.columns.mask, role.columns.mask),
                    mask_aggregates=_narrow_aggregates(
                        self.columns.mask_aggregates, role.columns.mask_aggregates
                    ),
                ),
                # a role adds row filters; where both filter a table, both apply (AND)
                "rows": _rows_union(self.rows, role.rows),
                "select_star": _star(self.select_star, role.select_star, name),
                "max_limit": min(self.max_limit, role.max_limit or self.max_limit),
                "row_cap": min(self.row_cap, role.row_cap or self.row_cap),
                "max_result_bytes": min(
                    self.max_result_bytes, role.max_result_bytes or self.max_result_bytes
                ),
                "statement_timeout": min(
                    self.statement_timeout, role.statement_timeout or self.statement_timeout
                ),
                "database_role": role.database_role or self.database_role,
                "database_url_env": role.database_url_env or self.database_url_env,
                "roles": {},
            }
        )

    @property
    def protects_columns(self) -> bool:
        """True when some column may not be read: database error text is then reduced to its
        error class (``safety.error_text``), since engines quote values in their errors."""
        return bool(self.columns.deny) or self.columns.allow is not None or bool(self.columns.mask)

    def safety_policy(self) -> SafetyPolicy:
        """The ``SafetyPolicy`` the validator takes (for a role: call ``for_role`` first)."""
        return SafetyPolicy(
            max_limit=self.max_limit,
            star="reject" if self.select_star in ("refuse", "reject") else "expand",
            allowed_tables=self.tables.allow,
            denied_tables=self.tables.deny,
            allowed_columns=self.columns.allow,
            denied_columns=self.columns.deny,
            allow_system_tables=self.allow_system_tables,
            extra_functions=self.extra_functions,
            denied_functions=self.denied_functions,
            max_value_bytes=self.max_result_bytes,
            masked_columns=tuple(sorted(self.columns.mask.items())),
            row_filters=tuple(sorted(self.rows.items())),
            mask_aggregates=(
                self.columns.mask_aggregates
                if self.columns.mask_aggregates is not None
                else ("count_distinct",)
            ),
        )

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of the policy: equal policies, equal fingerprints."""
        data = self.model_dump(mode="json")
        if self.risk == RiskRules():  # policies written before [risk] keep their fingerprint
            del data["risk"]
        for key in ("database_role", "database_url_env"):  # likewise before database logins
            if data.get(key) is None:
                data.pop(key, None)
        for role in data.get("roles", {}).values():
            for key in ("database_role", "database_url_env"):
                if role.get(key) is None:
                    role.pop(key, None)
        if self.approvals == ApprovalRules():  # ... and before [approvals]
            del data["approvals"]
        if self.auto_approval.envelope == "limit":  # ... and before auto_approval.envelope
            del data["auto_approval"]["envelope"]
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


#: The largest policy file read (a policy is a few hundred lines at most).
MAX_POLICY_BYTES = 1024 * 1024


_STRICT_MASKS = ("null", "redact", "last4", "email")


def _rows_union(base: dict[str, str], role: dict[str, str]) -> dict[str, str]:
    merged = dict(base)
    for entry, predicate in role.items():
        held = merged.get(entry)
        merged[entry] = predicate if held is None else f"({held}) AND ({predicate})"
    return merged


def _masks_union(base: dict[str, str], role: dict[str, str]) -> dict[str, str]:
    merged = dict(base)
    for entry, kind in role.items():
        held = merged.get(entry)
        merged[entry] = kind if held is None else min(held, kind, key=_STRICT_MASKS.index)
    return merged


def _narrow_aggregates(
    base: tuple[str, ...] | None, role: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    if role is None:
        return base
    allowed = set(base if base is not None else ("count_distinct",))
    return tuple(a for a in role if a in allowed)


def load_policy(path: str | Path) -> Policy:
    """Read a TOML policy file; ``PolicyError`` when it cannot be read or is malformed."""
    try:
        with Path(path).open("rb") as file:
            raw = file.read(MAX_POLICY_BYTES + 1)
    except OSError as error:
        raise PolicyError(f"invalid policy: cannot read {path}: {error.strerror}") from None
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError(
            f"invalid policy: larger than {MAX_POLICY_BYTES // 1024} KiB "
            "(a policy is a short TOML file)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PolicyError(
            f"invalid policy: not UTF-8 text (byte {error.start}): a policy is a TOML file"
        ) from None
    return Policy.from_toml_text(text)


def _allows_something(policy: Policy, prefix: str) -> None:
    """``PolicyError`` ("the policy allows nothing") when the allow list of tables or columns is
    empty or every entry in it is denied too: no question could ever be answered under it."""
    for section, rules in (("tables", policy.tables), ("columns", policy.columns)):
        if rules.allow is None:
            continue
        denied = {_key(e) for e in rules.deny}
        left = [e for e in rules.allow if _key(e) not in denied]
        if not left:
            why = (
                "its allow list is empty"
                if not rules.allow
                else "every entry of its allow list is denied too"
            )
            raise PolicyError(
                f"invalid policy: {prefix}{section}: the policy allows nothing ({why})",
                key=f"{prefix}{section}.allow",
            )


def _key(entry: str) -> str:
    return ".".join(p.strip().strip('"`').lower() for p in entry.split("."))


def _narrow(
    base: tuple[str, ...] | None, role: tuple[str, ...] | None, key: str
) -> tuple[str, ...] | None:
    if role is None:
        return base
    if base is not None:
        allowed = {_key(e) for e in base}
        wider = [e for e in role if _key(e) not in allowed]
        if wider:
            raise PolicyError(
                f"invalid policy: {key}: {', '.join(wider)} not in the base allow list "
                f"(a role can only narrow it)",
                key=key,
            )
    return role


def _union(base: tuple[str, ...], role: tuple[str, ...]) -> tuple[str, ...]:
    seen = {_key(e) for e in base}
    return base + tuple(e for e in role if _key(e) not in seen)


def _star(base: StarMode, role: StarMode | None, name: str) -> StarMode:
    if role is None or role == base:
        return base
    if role == "expand" and base in ("refuse", "reject"):
        raise PolicyError(
            f"invalid policy: roles.{name}.select_star: a role cannot expand what the base refuses",
            key=f"roles.{name}.select_star",
        )
    return role
