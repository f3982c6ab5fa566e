"""DataExplorer: what the values of the filter columns look like, so the SQL matches them.

Bounded by construction: at most ``max_distinct + 1`` distinct values per column (the extra one
tells whether the list is complete) and ``sample_rows`` rows per table. Identifiers are quoted
by SQLAlchemy for the engine's dialect, never pasted into SQL text. Output order is fixed
(values sorted, samples ordered by primary key), so the same database gives the same prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from agents.errors import ExecutionError
from agents.schema_explorer import SchemaContext, SchemaExplorer, TableInfo
from agents.sql_executor import clean_message, json_safe

__all__ = ["ColumnValues", "DataContext", "DataExplorer", "TableSample"]

#: Values shown for a column with more distinct values than listed (its range is shown too).
TRUNCATED_EXAMPLES = 5


class ColumnValues(BaseModel):
    """The distinct non-NULL values of one column, sorted; complete unless ``truncated``."""

    table: str = Field(description="Table name")
    column: str = Field(description="Column name")
    type: str = Field(default="", description="Declared column type")
    values: list[Any] = Field(
        default_factory=list, description="Sorted distinct non-NULL values, at most max_distinct"
    )
    truncated: bool = Field(
        default=False, description="True when the column has more distinct values than listed"
    )
    has_nulls: bool = Field(default=False, description="Whether the column holds NULLs")
    minimum: Any = Field(
        default=None, description="Smallest value, given when the list is truncated"
    )
    maximum: Any = Field(
        default=None, description="Largest value, given when the list is truncated"
    )

    def render(self) -> str:
        values = self.values[:TRUNCATED_EXAMPLES] if self.truncated else self.values
        shown = ", ".join(_literal(v) for v in values) or "(no values)"
        text = f"{self.table}.{self.column}"
        if self.type:
            text += f" ({self.type})"
        if self.truncated:
            text += f": more than {len(self.values)} distinct values, e.g. {shown}"
            if self.minimum is not None:
                text += f"; range {_literal(self.minimum)} .. {_literal(self.maximum)}"
        else:
            text += f": {shown}"
        if self.has_nulls:
            text += "; also NULL"
        return text


class TableSample(BaseModel):
    """A few rows of one table, first by primary key."""

    table: str = Field(description="Table name")
    columns: list[str] = Field(default_factory=list, description="Sampled columns")
    rows: list[list[Any]] = Field(default_factory=list, description="Sample rows, JSON-safe")

    def render(self) -> str:
        lines = [f"sample rows of {self.table}:", "  " + " | ".join(self.columns)]
        lines += ["  " + " | ".join(_literal(v) for v in row) for row in self.rows]
        return "\n".join(lines)


class DataContext(BaseModel):
    """Values and samples for the plan's filter columns."""

    columns: list[ColumnValues] = Field(
        default_factory=list, description="One entry per explored filter column"
    )
    samples: list[TableSample] = Field(
        default_factory=list, description="Sample rows per filtered table"
    )
    skipped: list[str] = Field(
        default_factory=list, description="Filters not explored, each with the reason"
    )

    def render(self) -> str:
        parts = [c.render() for c in self.columns] + [s.render() for s in self.samples]
        if self.skipped:
            parts.append("not explored: " + "; ".join(self.skipped))
        return "\n".join(parts)

    def summary(self) -> str:
        out = f"{len(self.columns)} columns, {len(self.samples)} samples"
        return out + (f", {len(self.skipped)} skipped" if self.skipped else "")


class DataExplorer:
    """Reads distinct values and sample rows for filter columns through ``engine``.

    Example:
        >>> engine = sa.create_engine("sqlite://", poolclass=sa.pool.StaticPool)
        >>> with engine.begin() as conn:
        ...     _ = conn.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, status TEXT)")
        ...     _ = conn.exec_driver_sql("INSERT INTO t VALUES (1, 'open'), (2, 'closed'), (3, 'open')")
        >>> print(DataExplorer(engine, sample_rows=0).explore([("t", "status")]).render())
        t.status (TEXT): 'closed', 'open'
    """

    def __init__(
        self,
        engine: Engine,
        max_distinct: int = 20,
        sample_rows: int = 3,
        max_sample_columns: int = 12,
        max_value_chars: int = 80,
    ) -> None:
        self.engine = engine
        self.max_distinct = max_distinct
        self.sample_rows = sample_rows
        self.max_sample_columns = max_sample_columns
        self.max_value_chars = max_value_chars

    def explore(self, filters: Iterable[Any], schema: SchemaContext | None = None) -> DataContext:
        """Explore each filter column that exists.

        ``filters`` holds ``(table, column)`` pairs, ``"table.column"`` strings or objects with
        ``table`` and ``column`` attributes. Tables are looked up in ``schema`` first, then in
        the whole database.
        """
        explorer = SchemaExplorer(self.engine, db_schema=schema.db_schema if schema else None)
        db_schema = explorer.db_schema
        out = DataContext()
        wanted: list[tuple[TableInfo, str]] = []
        for item in filters:
            table_name, column_name = _pair(item)
            info = (schema.table(table_name) if schema is not None else None) or explorer.table(
                table_name
            )
            column = info.column(column_name) if info is not None else None
            if info is None:
                out.skipped.append(f"{table_name}.{column_name}: no such table")
            elif column is None:
                out.skipped.append(f"{info.name}.{column_name}: no such column")
            elif (info, column.name) not in wanted:
                wanted.append((info, column.name))
        if not wanted:
            return out
        try:
            conn = self.engine.connect()
        except sa.exc.SQLAlchemyError as exc:
            raise ExecutionError("database_unreachable", clean_message(exc)) from exc
        with conn:
            for info, column_name in wanted:
                try:
                    out.columns.append(self._values(conn, info, column_name, db_schema))
                except sa.exc.SQLAlchemyError as exc:
                    conn.rollback()
                    out.skipped.append(f"{info.name}.{column_name}: {clean_message(exc)}")
            if self.sample_rows > 0:
                for info in {info.name: info for info, _ in wanted}.values():
                    try:
                        out.samples.append(self._sample(conn, info, db_schema))
                    except sa.exc.SQLAlchemyError as exc:
                        conn.rollback()
                        out.skipped.append(f"{info.name} sample: {clean_message(exc)}")
        return out

    def _values(
        self, conn: sa.Connection, info: TableInfo, column_name: str, db_schema: str | None
    ) -> ColumnValues:
        table = sa.table(info.name, sa.column(column_name), schema=db_schema)
        col = table.c[column_name]
        found = (
            conn.execute(
                sa.select(col)
                .where(col.is_not(None))
                .distinct()
                .order_by(col)
                .limit(self.max_distinct + 1)
            )
            .scalars()
            .all()
        )
        truncated = len(found) > self.max_distinct
        has_nulls = (
            conn.execute(
                sa.select(sa.literal(1)).select_from(table).where(col.is_(None)).limit(1)
            ).first()
            is not None
        )
        column_info = info.column(column_name)
        assert column_info is not None  # the column was found in the table above
        result = ColumnValues(
            table=info.name,
            column=column_name,
            type=column_info.type,
            values=[self._value(v) for v in found[: self.max_distinct]],
            truncated=truncated,
            has_nulls=has_nulls,
        )
        if truncated:
            low, high = conn.execute(
                sa.select(sa.func.min(col), sa.func.max(col)).select_from(table)
            ).one()
            result.minimum, result.maximum = self._value(low), self._value(high)
        return result

    def _sample(self, conn: sa.Connection, info: TableInfo, db_schema: str | None) -> TableSample:
        names = info.column_names()[: self.max_sample_columns]
        table = sa.table(info.name, *(sa.column(n) for n in info.column_names()), schema=db_schema)
        order = [table.c[n] for n in (info.primary_key or info.column_names()[:1])]
        rows = conn.execute(
            sa.select(*(table.c[n] for n in names)).order_by(*order).limit(self.sample_rows)
        ).all()
        return TableSample(
            table=info.name, columns=names, rows=[[self._value(v) for v in row] for row in rows]
        )

    def _value(self, value: Any) -> Any:
        value = json_safe(value)
        if isinstance(value, str) and len(value) > self.max_value_chars:
            return value[: self.max_value_chars - 3] + "..."
        return value


def _pair(item: Any) -> tuple[str, str]:
    if isinstance(item, str):
        table, _, column = item.rpartition(".")
        return table, column
    if isinstance(item, (tuple, list)):
        table, column = item
        return str(table), str(column)
    return str(item.table), str(item.column)


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)
