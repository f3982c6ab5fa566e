"""The schema as the agents see it: ``TableInfo`` with its ``ColumnInfo`` and ``ForeignKeyInfo``,
and ``SchemaContext``, the part of it one question needs.

``agents.schema_explorer`` reads these from a database; the descriptions file, the catalogue
and schema linking read and annotate them without touching a database.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, Field

__all__ = ["ColumnInfo", "ForeignKeyInfo", "SchemaContext", "TableInfo", "match_name"]


class ColumnInfo(BaseModel):
    """One column as the database declares it."""

    name: str = Field(description="Column name as stored in the database")
    type: str = Field(
        description="Declared type in the database's own spelling, e.g. NUMERIC(10, 2)"
    )
    nullable: bool = Field(default=True, description="Whether NULL is allowed")
    primary_key: bool = Field(
        default=False, description="Whether the column is part of the primary key"
    )
    comment: str | None = Field(default=None, description="The column's comment, if it has one")
    values: list[str] = Field(
        default_factory=list,
        description="Sampled distinct values of a short text column (empty unless sampling is on)",
    )


class ForeignKeyInfo(BaseModel):
    """A foreign key from some columns of a table to another table's columns."""

    columns: list[str] = Field(description="Referencing columns, in order")
    referred_table: str = Field(description="Referenced table")
    referred_columns: list[str] = Field(description="Referenced columns, in order")

    def summary(self) -> str:
        return f"({', '.join(self.columns)}) -> {self.referred_table}({', '.join(self.referred_columns)})"


class TableInfo(BaseModel):
    """A table or view with its columns and keys."""

    name: str = Field(description="Table name as stored in the database")
    kind: Literal["table", "view"] = Field(default="table", description="Table or view")
    comment: str | None = Field(default=None, description="The table's comment, if it has one")
    columns: list[ColumnInfo] = Field(
        default_factory=list, description="Columns in declaration order"
    )
    primary_key: list[str] = Field(
        default_factory=list, description="Primary key columns, in order"
    )
    foreign_keys: list[ForeignKeyInfo] = Field(
        default_factory=list, description="Outgoing foreign keys"
    )

    def column(self, name: str) -> ColumnInfo | None:
        """The column called ``name``, matched without regard to case."""
        wanted = _unquote(name)
        exact = [c for c in self.columns if c.name == wanted]
        if exact:
            return exact[0]
        folded = [c for c in self.columns if c.name.casefold() == wanted.casefold()]
        return folded[0] if len(folded) == 1 else None

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def catalogue_line(self) -> str:
        return f"{self.name}({', '.join(f'{c.name} {c.type}'.rstrip() for c in self.columns)})"

    def compact_line(self) -> str:
        """``name(column, ...)``: the columns without their types, for a long catalogue."""
        return f"{self.name}({', '.join(c.name for c in self.columns)})"

    def render(self, dialect: str = "sqlite") -> str:
        """CREATE-TABLE-like text: single-column keys inline, composite keys as constraints."""
        q = _quoter(dialect)
        single_pk = self.primary_key[0] if len(self.primary_key) == 1 else None
        inline_fk = {fk.columns[0]: fk for fk in self.foreign_keys if len(fk.columns) == 1}
        lines = []
        for col in self.columns:
            parts = [q(col.name)]
            if col.type:
                parts.append(col.type)
            if col.name == single_pk:
                parts.append("PRIMARY KEY")
            elif not col.nullable:
                parts.append("NOT NULL")
            fk = inline_fk.get(col.name)
            if fk is not None:
                parts.append(
                    f"REFERENCES {q(fk.referred_table)}({', '.join(map(q, fk.referred_columns))})"
                )
            lines.append(" ".join(parts))
        if len(self.primary_key) > 1:
            lines.append(f"PRIMARY KEY ({', '.join(map(q, self.primary_key))})")
        for fk in self.foreign_keys:
            if len(fk.columns) > 1:
                lines.append(
                    f"FOREIGN KEY ({', '.join(map(q, fk.columns))}) "
                    f"REFERENCES {q(fk.referred_table)}({', '.join(map(q, fk.referred_columns))})"
                )
        body = ",\n".join(f"  {line}" for line in lines)
        return f"CREATE {self.kind.upper()} {q(self.name)} (\n{body}\n);"

    def summary(self) -> str:
        return f"{self.name}: {len(self.columns)} columns, pk={self.primary_key}, {len(self.foreign_keys)} fks"


class SchemaContext(BaseModel):
    """The part of the schema one question needs: planned tables first, then their neighbours."""

    dialect: str = Field(description="sqlglot dialect name: sqlite, postgres, mysql or duckdb")
    db_schema: str | None = Field(
        default=None, description="Schema (namespace) of the tables; None for the default"
    )
    tables: list[TableInfo] = Field(
        default_factory=list, description="Planned tables, then FK neighbours"
    )
    requested: list[str] = Field(
        default_factory=list, description="Planned tables found, by their real names"
    )
    neighbours: list[str] = Field(
        default_factory=list, description="Tables added as foreign-key neighbours"
    )
    unknown_tables: list[str] = Field(
        default_factory=list, description="Planned names that match no table"
    )

    def table(self, name: str) -> TableInfo | None:
        return match_name(name, {t.name: t for t in self.tables})

    def columns_by_table(self) -> dict[str, list[str]]:
        """``{table: [column, ...]}``, the shape the safety validator takes as ``schema``."""
        return {t.name: t.column_names() for t in self.tables}

    def render(self) -> str:
        text = "\n".join(t.render(self.dialect) for t in self.tables)
        if self.unknown_tables:
            text += f"\n-- no such tables: {', '.join(self.unknown_tables)}"
        return text

    def summary(self) -> str:
        out = f"{len(self.requested)} planned ({', '.join(self.requested) or '-'})"
        out += f", {len(self.neighbours)} neighbours ({', '.join(self.neighbours) or '-'})"
        if self.unknown_tables:
            out += f", unknown: {', '.join(self.unknown_tables)}"
        return out


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] + name[-1] in ('""', "``", "[]"):
        return name[1:-1]
    return name


def match_name(raw: str, named: dict[str, Any]) -> Any:
    """Exact name, then case-insensitive, then the last part of a dotted ``schema.table``."""
    candidates = [_unquote(raw)]
    if "." in raw:
        candidates.append(_unquote(raw.rsplit(".", 1)[1]))
    for name in candidates:
        if name in named:
            return named[name]
        folded = [v for k, v in named.items() if k.casefold() == name.casefold()]
        if len(folded) == 1:
            return folded[0]
    return None


@cache
def _quoter(dialect: str) -> Any:
    """Quote identifiers the way ``dialect`` needs (reserved words, case, odd characters)."""
    sa_name = {"postgres": "postgresql"}.get(dialect, dialect)
    try:
        preparer = sa.dialects.registry.load(sa_name)().identifier_preparer
    except Exception:
        plain = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
        return lambda name: name if plain.match(name) else '"' + name.replace('"', '""') + '"'
    return preparer.quote
