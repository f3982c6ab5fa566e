"""ValidatedStatement: SQL a validator accepted, the only thing the executor runs.

A ``ValidatedStatement`` is minted by ``SqlValidator.validate`` (``ValidationResult.statement``)
and by nothing else in the product: its constructor wants a token private to this module, so
text cannot become runnable by naming a dialect. It carries the SQL exactly as rendered from
the checked tree, the dialect it was checked in, and the validator's row limit.

Example:
    >>> from safety import SqlValidator
    >>> statement = SqlValidator("sqlite").validate("SELECT 1 AS n").statement
    >>> statement.sql, statement.dialect
    ('SELECT 1 AS n LIMIT 1001', 'sqlite')
    >>> ValidatedStatement("SELECT load_file('/etc/passwd')", "mysql", None, object())
    Traceback (most recent call last):
    ...
    TypeError: a ValidatedStatement is made by SqlValidator.validate, not by hand
"""

from __future__ import annotations

__all__ = ["ValidatedStatement"]

_MINT = object()  # only this module holds it: the validator mints through ``_minted``


class ValidatedStatement:
    """SQL that passed a ``SqlValidator``, in the dialect it was checked in."""

    __slots__ = ("dialect", "row_limit", "sql")

    sql: str
    dialect: str
    row_limit: int | None

    def __init__(self, sql: str, dialect: str, row_limit: int | None, token: object) -> None:
        if token is not _MINT:
            raise TypeError("a ValidatedStatement is made by SqlValidator.validate, not by hand")
        object.__setattr__(self, "sql", sql)
        object.__setattr__(self, "dialect", dialect)
        object.__setattr__(self, "row_limit", row_limit)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a ValidatedStatement cannot be changed")

    def __repr__(self) -> str:
        return f"ValidatedStatement({self.sql!r}, dialect={self.dialect!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValidatedStatement) and (
            self.sql,
            self.dialect,
            self.row_limit,
        ) == (other.sql, other.dialect, other.row_limit)

    def __hash__(self) -> int:
        return hash((self.sql, self.dialect, self.row_limit))


def _minted(sql: str, dialect: str, row_limit: int | None) -> ValidatedStatement:
    """For ``SqlValidator`` alone (and tests of the database's own defences, which run SQL the
    validator refuses on purpose): a statement without a further check."""
    return ValidatedStatement(sql, dialect, row_limit, _MINT)
