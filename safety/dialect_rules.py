"""Rules for dialect features that reach past the query: session state, settings, hidden SQL.

- MySQL executable comments ``/*! ... */`` run on MySQL/MariaDB but are only comments to the
  parser: refused, never silently dropped (``executable_comment``).
- Session-variable writes (``SELECT @v := 1``) change the session: refused
  (``session_variable_write``).
- Server settings (``@@global.x``, ``@@hostname``) are refused like PostgreSQL's
  ``current_setting`` (``server_setting``).
- ``REGEXP`` on SQLite runs whatever function the connection registered (a backtracking engine
  can stall the process): refused (``regexp_unsupported``). On MySQL/MariaDB it is rendered as
  ``(x REGEXP y)``, which both engines run (MariaDB has no ``REGEXP_LIKE``).

Example:
    >>> from safety import SqlValidator
    >>> SqlValidator("mysql").validate("SELECT @@hostname").refusal.code
    'server_setting'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, TokenError

from .node_labels import where

if TYPE_CHECKING:
    from .rule_context import RuleContext

__all__ = [
    "check_executable_comments",
    "check_regexp",
    "check_session_state",
    "render",
]


def check_executable_comments(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """``/*! ... */`` (and ``/*M! ... */``) hide SQL that MySQL/MariaDB execute: refused."""
    if ctx.dialect != "mysql" or "/*" not in ctx.sql:
        return expression
    try:
        tokens = Dialect.get_or_raise(ctx.dialect).tokenize(ctx.sql)
    except TokenError:
        return expression  # the parser already accepted the text; nothing hidden to find
    for token in tokens:
        for comment in token.comments or ():
            text = comment.lstrip()
            if text.startswith(("!", "M!")):
                ctx.report(
                    "executable_comment",
                    f"The comment /*{comment.strip()[:40]}*/ is an executable comment: MySQL and MariaDB run "
                    f"its content as SQL. Write the SQL plainly, without /*! ... */.",
                    expression,
                )
                ctx.halted = True
                return expression
    return expression


def check_session_state(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """Session-variable writes and server settings (``@v := 1``, ``@@global.x``) are refused."""
    for node in ctx.of(expression, exp.PropertyEQ):
        target = node.this
        if isinstance(target, (exp.Parameter, exp.SessionParameter)):
            ctx.report(
                "session_variable_write",
                f"The assignment {node.sql(ctx.dialect)} {where(node)} writes a session variable; a "
                f"read-only query may not change session state.",
                node,
            )
    for node in ctx.of(expression, exp.Parameter):
        if isinstance(node.this, exp.Parameter):  # @@name read as a parameter of a parameter
            ctx.report(
                "server_setting",
                f"The server setting {node.sql(ctx.dialect)} {where(node)} may not be read.",
                node,
            )
    for node in ctx.of(expression, exp.SessionParameter):
        ctx.report(
            "server_setting",
            f"The server setting {node.sql(ctx.dialect)} {where(node)} may not be read (server "
            f"settings are refused like current_setting).",
            node,
        )
    return expression


def check_regexp(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
    """SQLite has no built-in REGEXP; the function a connection registers may backtrack: refused."""
    if ctx.dialect != "sqlite":
        return expression
    for node in ctx.of(expression, exp.RegexpLike, exp.RegexpILike):
        ctx.report(
            "regexp_unsupported",
            f"REGEXP {where(node)} is not available on SQLite; use LIKE or GLOB.",
            node,
        )
    return expression


def render(expression: exp.Expression, dialect: Dialect, text: str = "") -> str:
    """The SQL that runs: ``expression`` rendered for the engine, comments dropped.

    On MySQL/MariaDB ``REGEXP_LIKE(x, y)`` becomes ``(x REGEXP y)``: MariaDB has no
    ``REGEXP_LIKE``. The operands are rendered by the same generator; the operator is written
    here because sqlglot's MySQL generator cannot be extended when it is compiled (sqlglotc).
    ``text`` is the submitted SQL: without "regexp" or "rlike" in it there is nothing to rewrite.

    Example:
        >>> import sqlglot
        >>> mysql = Dialect.get_or_raise("mysql")
        >>> render(sqlglot.parse_one("SELECT a RLIKE 'x'", read="mysql"), mysql, "rlike")
        "SELECT (a REGEXP 'x')"
    """
    lowered = text.lower()
    if dialect.__class__.__name__ == "MySQL" and ("regexp" in lowered or "rlike" in lowered):
        for node in list(expression.find_all(exp.RegexpLike)):
            if (
                node.args.get("flag") is None
                and node.this is not None
                and node.expression is not None
            ):
                this = node.this.sql(dialect=dialect, comments=False)
                pattern = node.expression.sql(dialect=dialect, comments=False)
                node.replace(exp.Paren(this=exp.Var(this=f"{this} REGEXP {pattern}")))
    # copy=False: the tree is ours and discarded after rendering, so skip the defensive copy.
    # unsupported_level=RAISE: a construct the engine's dialect cannot express is refused, never
    # rendered as sqlglot's nearest approximation (which would run something nobody validated).
    return expression.sql(
        dialect=dialect, comments=False, copy=False, unsupported_level=ErrorLevel.RAISE
    )
