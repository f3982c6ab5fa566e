import sqlite3

import sqlalchemy as sa

from safety import (
    PolicyError,
    ReadOnlySetupError,
    SafetyError,
    StatementTimeout,
    UnsupportedDialect,
    errors,
    is_statement_timeout,
)


def test_every_error_has_a_snake_case_code_and_shares_the_base():
    for cls in (SafetyError, UnsupportedDialect, ReadOnlySetupError, StatementTimeout, PolicyError):
        assert issubclass(cls, SafetyError)
        assert cls.code == cls.code.lower() and " " not in cls.code


def test_codes_are_distinct():
    codes = [
        SafetyError.code,
        UnsupportedDialect.code,
        ReadOnlySetupError.code,
        StatementTimeout.code,
        PolicyError.code,
    ]
    assert len(set(codes)) == len(codes)


def test_tree_is_drawn_in_the_module_docstring():
    for cls in (SafetyError, UnsupportedDialect, ReadOnlySetupError, StatementTimeout, PolicyError):
        assert cls.__name__ in errors.__doc__


def test_sqlite_interrupt_wrapped_by_sqlalchemy_is_a_timeout():
    wrapped = sa.exc.OperationalError("select 1", {}, sqlite3.OperationalError("interrupted"))
    assert is_statement_timeout(wrapped)


def test_other_errors_are_not_timeouts():
    assert not is_statement_timeout(sqlite3.OperationalError("no such table: t"))
    assert not is_statement_timeout(ValueError("interrupted"))


def test_pymysql_timeout_errnos():
    import pymysql

    assert is_statement_timeout(
        pymysql.err.OperationalError(3024, "Query execution was interrupted")
    )
    assert is_statement_timeout(pymysql.err.OperationalError(1969, "max_statement_time exceeded"))
    assert not is_statement_timeout(pymysql.err.OperationalError(1146, "Table doesn't exist"))
