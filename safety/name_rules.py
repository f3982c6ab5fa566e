"""The policy's table and column lists, parsed once: ``NameRules`` and the entry syntax.

The rules that apply them to a statement are in ``safety.access``.

Policy entries are ``table`` or ``schema.table`` for tables, and ``column``, ``table.column`` or
``schema.table.column`` for columns, compared lower-cased. The reading is the fail-closed one:

- a **deny** entry without a schema denies that table (or column) in every schema;
- an **allow** entry without a schema allows it only in the engine's default schema
  (``public``, ``main``, the MySQL database), so ``other_schema.allowed_name`` is not allowed;
- a bare column entry applies to that column of every table.

Example:
    >>> rules = NameRules.from_policy(denied_tables=("audit",), allowed_tables=("users",))
    >>> rules.table_verdict("public", "users", "public"), rules.table_verdict("sales", "users", "public")
    (None, 'table_not_allowed')
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ColumnKey", "NameRules", "TableKey", "split_entry"]

TableKey = tuple[str | None, str]
ColumnKey = tuple[str | None, str | None, str]


def split_entry(entry: str, most: int) -> tuple[str, ...]:
    """``"a.b"`` -> ``("a", "b")``, lower-cased; ValueError for empty parts or more than ``most``.

    Example:
        >>> split_entry("Public.Users.Email", 3)
        ('public', 'users', 'email')
    """
    parts = tuple(p.strip().strip('"`').lower() for p in str(entry).split("."))
    if not all(parts) or len(parts) > most:
        shape = (
            "table or schema.table" if most == 2 else "column, table.column or schema.table.column"
        )
        raise ValueError(f"{entry!r} is not a valid entry (expected {shape})")
    return parts


def _tables(entries: Iterable[str]) -> frozenset[TableKey]:
    keys: set[TableKey] = set()
    for entry in entries:
        parts = split_entry(entry, 2)
        keys.add((parts[0], parts[1]) if len(parts) == 2 else (None, parts[0]))
    return frozenset(keys)


def _columns(entries: Iterable[str]) -> frozenset[ColumnKey]:
    keys: set[ColumnKey] = set()
    for entry in entries:
        parts = split_entry(entry, 3)
        padded = (None,) * (3 - len(parts)) + parts
        keys.add((padded[0], padded[1], padded[2]))  # type: ignore[arg-type]
    return frozenset(keys)


def _schema_matches(entry: str | None, actual: str | None, default: str | None, deny: bool) -> bool:
    if entry is None:
        return deny or actual is None or actual == default
    if actual is None:
        return deny  # the table's schema is unknown: a qualified deny entry still counts
    return entry == actual


@dataclass(frozen=True)
class NameRules:
    """The policy's table and column lists, parsed once per validator."""

    allowed_tables: frozenset[TableKey] | None
    denied_tables: frozenset[TableKey]
    allowed_columns: frozenset[ColumnKey] | None
    denied_columns: frozenset[ColumnKey]

    @classmethod
    def from_policy(
        cls,
        allowed_tables: Iterable[str] | None = None,
        denied_tables: Iterable[str] = (),
        allowed_columns: Iterable[str] | None = None,
        denied_columns: Iterable[str] = (),
    ) -> NameRules:
        return cls(
            None if allowed_tables is None else _tables(allowed_tables),
            _tables(denied_tables),
            None if allowed_columns is None else _columns(allowed_columns),
            _columns(denied_columns),
        )

    @property
    def empty(self) -> bool:
        return not self.has_table_rules and not self.has_column_rules

    @property
    def has_table_rules(self) -> bool:
        return self.allowed_tables is not None or bool(self.denied_tables)

    @property
    def has_column_rules(self) -> bool:
        return self.allowed_columns is not None or bool(self.denied_columns)

    def is_view(self, schema: str | None, table: str) -> bool:
        """True when ``schema.table`` is a view whose verdicts follow its lineage
        (``safety.lineage.LineageRules``); plain name rules know no views."""
        return False

    def view_reason(self, schema: str | None, table: str, default: str | None) -> str:
        """Why reading a view is refused, in words; empty for plain name rules."""
        return ""

    def table_verdict(self, schema: str | None, table: str, default: str | None) -> str | None:
        """None when ``schema.table`` may be read, else ``table_denied`` / ``table_not_allowed``."""
        if any(
            t == table and _schema_matches(s, schema, default, True) for s, t in self.denied_tables
        ):
            return "table_denied"
        if self.allowed_tables is not None and not any(
            t == table and _schema_matches(s, schema, default, False)
            for s, t in self.allowed_tables
        ):
            return "table_not_allowed"
        return None

    def column_verdict(
        self, schema: str | None, table: str, column: str, default: str | None
    ) -> str | None:
        """None when the column may be read, else ``column_denied`` / ``column_not_allowed``."""

        def listed(entries: frozenset[ColumnKey], deny: bool) -> bool:
            return any(
                c == column
                and (t is None or (t == table and _schema_matches(s, schema, default, deny)))
                for s, t, c in entries
            )

        if listed(self.denied_columns, True):
            return "column_denied"
        if self.allowed_columns is not None and not listed(self.allowed_columns, False):
            return "column_not_allowed"
        return None
