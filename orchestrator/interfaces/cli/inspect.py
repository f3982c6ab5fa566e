"""``sqlgate schema``, ``validate`` and ``limits``: what sqlgate sees, before anything runs."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from approvals.terminal_text import terminal_console
from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import (
    BaseUrlOpt,
    DbOpt,
    JsonOpt,
    MaxLimitOpt,
    PolicyOpt,
    RoleOpt,
    emit_json,
    fail,
    fail_with,
    policy_with,
)
from safety import SafetyError


def schema(
    db: DbOpt = None,
    tables: Annotated[
        list[str] | None, typer.Argument(help="Tables to show (with their FK neighbours).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the schema sqlgate explores: tables, columns, keys and foreign keys."""
    from orchestrator.core.database import TargetDatabase

    try:
        database = TargetDatabase(db or "")
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        return
    names = tables or database.schema.table_names()
    context = database.schema.explore(names)
    if as_json:
        emit_json({"dialect": database.dialect, **context.model_dump(mode="json")})
    else:
        console = terminal_console()
        console.print(
            f"[bold]{database.safe_url}[/] ({database.dialect}), {len(context.tables)} table(s)"
        )
        from orchestrator.features.render import sql_block

        console.print(sql_block(context.render()))
        if context.unknown_tables:
            console.print(f"[yellow]unknown tables: {', '.join(context.unknown_tables)}[/]")
    database.dispose()


def validate(
    sql: Annotated[str, typer.Argument(help="The SQL to check ('-' reads it from stdin).")],
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Check against this database's real schema (read-only); the dialect is then "
            "the URL's. Without it, references cannot be resolved: with table or column rules "
            "in the policy they are refused, and SELECT * cannot be expanded.",
        ),
    ] = None,
    dialect: Annotated[
        str | None,
        typer.Option(
            help="sqlite, postgres, mysql or duckdb (default: the --db URL's, or sqlite)."
        ),
    ] = None,
    max_limit: MaxLimitOpt = None,
    policy: PolicyOpt = None,
    role: RoleOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check SQL against the safety policy and print the SQL that would run.

    Exit 0 when accepted (the rewritten SQL is printed), 1 when refused (a code and a reason),
    2 for a bad option or policy file, 10 when the --db database cannot be opened.

    Examples:
      sqlgate validate "SELECT name FROM customers" --dialect postgres
      sqlgate validate "SELECT * FROM orders" --db sqlite:///shop.db --policy policy.toml
    """
    from orchestrator.core.database import TargetDatabase
    from orchestrator.features.render import render_validation
    from orchestrator.interfaces.reviewer_identity import cli_asker_identity
    from safety import SqlValidator

    text = sys.stdin.read() if sql == "-" else sql
    try:
        rules = policy_with(policy, max_limit=max_limit, role=role)
        if db:
            database = TargetDatabase(db, policy=rules)
            if dialect is not None and dialect != database.dialect:
                database.dispose()
                fail(
                    f"--dialect {dialect} does not match the database, which is "
                    f"{database.dialect}: leave --dialect out with --db",
                    as_json=as_json,
                    error_code="dialect_mismatch",
                )
            # row filters bound as for `sqlgate ask`: the proven token's attributes, else none
            validator = database.validator(None, cli_asker_identity() if rules.rows else None)
            database.dispose()
        else:
            validator = SqlValidator(dialect=dialect or "sqlite", policy=rules.safety_policy())
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        return
    except SafetyError as exc:  # an unknown dialect
        fail(str(exc), as_json=as_json, error_code="invalid_dialect")
        return
    result = validator.validate(text)
    if as_json:
        refusal = result.refusal
        emit_json(
            {
                "ok": result.ok,
                "sql": result.sql,
                "code": refusal.code if refusal else None,
                "reason": refusal.message if refusal else None,
                "findings": [f.model_dump(mode="json") for f in result.findings],
            }
        )
    else:
        render_validation(terminal_console(), result, text)
    raise typer.Exit(0 if result.ok else 1)


def limits(
    as_json: JsonOpt = False,
    base_url: BaseUrlOpt = None,
) -> None:
    """Show the shared LLM rate limit: requests (and tokens) used in the window, and the next free slot.

    The window is shared by every sqlgate process using the same backend (SQLGATE_RATE_BACKEND;
    default: a SQLite file in the state folder) and the same endpoint and key.
    """
    from orchestrator.core.config import Settings
    from orchestrator.core.limits import build_limiter

    try:
        settings = Settings.from_env()
        settings.llm.base_url = base_url or settings.llm.base_url
        limiter = build_limiter(settings, mode="fail_fast")
        usages = limiter.usages()
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        return
    except Exception as exc:  # a shared backend that is down: say so, never guess
        fail(
            f"the rate-limit backend is unavailable: {exc}",
            as_json=as_json,
            error_code="backend_unavailable",
        )
        return
    rows = [
        {
            "unit": u.unit,
            "used": u.used,
            "limit": u.limit,
            "window_s": u.window,
            "next_free_in_s": round(u.retry_after, 3),
        }
        for u in usages
    ]
    if as_json:
        emit_json({"key": limiter.key, "limits": rows})
        return
    from orchestrator.features.render import rows_table

    terminal_console().print(
        rows_table(
            ["unit", "used", "limit", "window (s)", "next free in (s)"],
            [[r["unit"], r["used"], r["limit"], r["window_s"], r["next_free_in_s"]] for r in rows],
            title=f"rate limit for {settings.llm.base_url or 'OpenAI'}",
        )
    )
