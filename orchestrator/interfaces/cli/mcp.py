"""``sqlgate mcp``: serve sqlgate to AI assistants over the Model Context Protocol."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from orchestrator.core.errors import SqlgateError
from orchestrator.interfaces.cli.common import DbOpt, PolicyOpt, fail


def mcp(
    db: DbOpt = None,
    transport: Annotated[
        str,
        typer.Option(
            help="stdio (an assistant launches sqlgate) or http (streamable HTTP at /mcp, "
            "bearer tokens required)."
        ),
    ] = "stdio",
    host: Annotated[str, typer.Option(help="With --transport http: address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="With --transport http: port.")] = 8001,
    tokens: Annotated[
        str | None,
        typer.Option(
            "--tokens",
            envvar="SQLGATE_TOKENS_FILE",
            help="With --transport http: the JSON token file of `sqlgate serve`.",
        ),
    ] = None,
    reviewer_url: Annotated[
        str | None,
        typer.Option(
            envvar="SQLGATE_REVIEWER_URL",
            help="The reviewer page agents point people to (e.g. http://host:8000/reviewer).",
        ),
    ] = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Queue questions for the model budget instead of refusing them with rate_limited.",
        ),
    ] = False,
    elicit: Annotated[
        bool,
        typer.Option(
            "--elicit",
            help="With --transport http: when the caller's token may decide (reviewer, admin), ask "
            "the person at the client to approve or reject (MCP elicitation).",
        ),
    ] = False,
    workers: Annotated[int | None, typer.Option(help="Runs executed at once (default 4).")] = None,
    policy: PolicyOpt = None,
) -> None:
    """Serve sqlgate to AI assistants (MCP): they may ask, only people approve.

    Tools: ask, run_status, wait_for_run, schema, validate, explain_policy. No tool approves:
    SQL waits at the gate for a reviewer (reviewer page, or `sqlgate approvals decide`).

    Example (stdio, in an assistant's configuration): sqlgate mcp --db sqlite:///shop.db
    """
    if transport not in ("stdio", "http"):
        fail(f"--transport must be stdio or http, not {transport!r}")
    mode: Literal["stdio", "http"] = "http" if transport == "http" else "stdio"
    from orchestrator.core.extras import needing

    try:
        mcp_config = needing("sqlgate mcp", _mcp_config, extra="mcp")
        config = mcp_config.from_env(
            db=db,
            wait=wait,
            reviewer_url=reviewer_url,
            tokens_file=tokens,
            need_tokens=mode == "http",
            elicit=elicit,
            workers=workers,
            policy_file=str(policy) if policy else None,
        )
        if mode == "http":
            needing("sqlgate mcp --transport http", _serve_http, extra="mcp")(
                config, host=host, port=port
            )
        else:
            needing("sqlgate mcp", _run_stdio, extra="mcp")(config)
    except SqlgateError as exc:
        fail(exc.message, error_code=exc.code)


def _mcp_config() -> Any:
    from orchestrator.interfaces.mcp.config import McpConfig

    return McpConfig


def _serve_http() -> Any:
    from orchestrator.interfaces.mcp.http import serve_http

    return serve_http


def _run_stdio() -> Any:
    from orchestrator.interfaces.mcp.server import run_stdio

    return run_stdio
