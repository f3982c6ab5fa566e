"""SafetyPolicy: the knobs of the validator, as one frozen, serialisable object."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SafetyPolicy"]


class SafetyPolicy(BaseModel):
    """What the validator allows and how it rewrites.

    Table and column names are compared case-insensitively. A column entry is either
    ``"table.column"`` or a bare ``"column"`` meaning that column in every table.
    """

    model_config = ConfigDict(frozen=True)

    max_limit: int = Field(
        default=1000, ge=1, description="Row cap: LIMIT added when missing, lowered above this."
    )
    enforce_limit: bool = Field(
        default=True, description="Add or lower LIMIT on the outermost query."
    )
    star: Literal["reject", "expand"] = Field(
        default="reject", description="SELECT *: refuse, or expand to the schema's columns."
    )
    allowed_tables: tuple[str, ...] | None = Field(
        default=None, description="When set, only these tables may be read."
    )
    denied_tables: tuple[str, ...] = Field(default=(), description="Tables that may never be read.")
    allowed_columns: tuple[str, ...] | None = Field(
        default=None, description="When set, only these columns may be referenced."
    )
    denied_columns: tuple[str, ...] = Field(
        default=(), description="Sensitive columns that may never be referenced."
    )
    allow_system_tables: bool = Field(
        default=False,
        description="Allow catalog tables (pg_catalog, information_schema, mysql.*, sqlite_master, ...).",
    )
    extra_functions: tuple[str, ...] = Field(
        default=(),
        description="Function names (lower case, no schema) allowed on top of the dialect's allowlist.",
    )
    denied_functions: tuple[str, ...] = Field(
        default=(), description="Function names refused on top of the built-in denylist."
    )
