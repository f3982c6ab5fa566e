"""SafetyPolicy: the knobs of the validator, as one frozen, serialisable object."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .mask_kinds import MASKS
from .name_rules import split_entry

__all__ = ["SafetyPolicy"]


class SafetyPolicy(BaseModel):
    """What the validator allows and how it rewrites.

    Table and column names are compared case-insensitively. A table entry is ``"table"`` or
    ``"schema.table"``; a column entry is ``"column"`` (that column in every table),
    ``"table.column"`` or ``"schema.table.column"``. See ``safety.access`` for how entries without
    a schema match. ``star="refuse"`` is accepted as another spelling of ``"reject"``.

    Example:
        >>> SafetyPolicy(star="refuse").star
        'reject'
    """

    model_config = ConfigDict(frozen=True)

    max_limit: int = Field(
        default=1000,
        ge=1,
        description="Row cap: at most this many rows are kept. A LIMIT of max_limit + 1 is added "
        "when missing or set when above this; the extra row tells that the result was cut.",
    )
    enforce_limit: bool = Field(
        default=True, description="Add or lower LIMIT on the outermost query."
    )
    star: Literal["reject", "expand"] = Field(
        default="expand",
        description="SELECT *: expand to the schema's columns the policy allows (default; refused when "
        "the schema is unknown), or refuse ('reject', also spelled 'refuse').",
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
    require_resolution: bool = Field(
        default=False,
        description="Resolve every reference against the schema even without table/column rules "
        "(unknown tables and columns refused).",
    )
    extra_functions: tuple[str, ...] = Field(
        default=(),
        description="Function names (lower case, no schema) allowed on top of the dialect's allowlist.",
    )
    denied_functions: tuple[str, ...] = Field(
        default=(), description="Function names refused on top of the built-in denylist."
    )
    masked_columns: tuple[tuple[str, str], ...] = Field(
        default=(),
        description="(column entry, mask) pairs: the column is shown through the mask (email, "
        "last4, null, redact) and used nowhere its value would leak (see safety.masking).",
    )
    mask_aggregates: tuple[str, ...] = Field(
        default=("count_distinct",),
        description="Aggregates a masked column may stand in: count_distinct (count(DISTINCT c)).",
    )
    row_filters: tuple[tuple[str, str], ...] = Field(
        default=(),
        description="(table entry, predicate) pairs: the table is read only through the predicate, "
        "whose {user.x} placeholders take the asker's attributes (see safety.row_filters).",
    )
    max_value_bytes: int | None = Field(
        default=None,
        ge=1,
        description="The most bytes one result row may take, checked by the database itself "
        "(PostgreSQL: the outermost query is wrapped, see safety.value_bound); None: unchecked.",
    )

    @field_validator("star", mode="before")
    @classmethod
    def _star_alias(cls, value: object) -> object:
        return "reject" if value == "refuse" else value

    @field_validator("allowed_tables", "denied_tables", mode="after")
    @classmethod
    def _table_entries(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for entry in value or ():
            split_entry(entry, 2)
        return value

    @field_validator("masked_columns", mode="after")
    @classmethod
    def _mask_entries(cls, value: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
        for entry, kind in value:
            split_entry(entry, 3)
            if kind not in MASKS:
                raise ValueError(f"{kind!r} is not a mask (expected one of {', '.join(MASKS)})")
        return value

    @field_validator("mask_aggregates", mode="after")
    @classmethod
    def _aggregates(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if name != "count_distinct":
                raise ValueError(f"{name!r} is not an aggregate masks allow (count_distinct)")
        return value

    @field_validator("allowed_columns", "denied_columns", mode="after")
    @classmethod
    def _column_entries(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for entry in value or ():
            split_entry(entry, 3)
        return value
