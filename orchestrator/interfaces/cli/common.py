"""What the ``sqlgate`` commands share: options, output (JSON on stdout, people's text on stderr),
the reviewer, the spinner, and opening the database and the model client."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape

from approvals.terminal_text import json_text, terminal_console
from orchestrator.core.errors import SqlgateError

if TYPE_CHECKING:  # the result model loads pydantic and the model client: not for --help
    from orchestrator.core.identity import Identity, IdentityValue
    from orchestrator.core.result import RunResult
    from safety import Policy

err = terminal_console(stderr=True)


def fail(
    message: str, code: int = 2, *, as_json: bool = False, error_code: str = "config_error"
) -> None:
    """Say what went wrong (as JSON too, for scripts) and exit with ``code`` (10 whatever the
    caller said for an unusable state database, as everywhere)."""
    if error_code == "state_database_error":
        code = 10
    if as_json:
        error = {"status": "error", "error": {"code": error_code, "message": message}}
        sys.stdout.write(json_text(error) + "\n")
    # The message is text, not markup: "pip install 'sqlgate[postgres]'" keeps its brackets.
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def fail_with(exc: SqlgateError, *, as_json: bool = False) -> NoReturn:
    """``fail`` for a sqlgate error: its message and code; exit 10 for a database that cannot
    be opened (or read) and for an unusable state database, 2 for anything else (a malformed
    URL, a bad option or file)."""
    fail(
        exc.message,
        10 if exc.code.startswith("database") or exc.code == "state_database_error" else 2,
        as_json=as_json,
        error_code=exc.code,
    )
    raise AssertionError("fail exits")  # pragma: no cover


def emit_json(payload: Any) -> None:
    sys.stdout.write(json_text(payload, indent=2) + "\n")
    sys.stdout.flush()


JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON to stdout.")]
DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="SQLGATE_DB",
        help="SQLAlchemy URL: sqlite:///file.db, postgresql+psycopg://user@host/db, "
        "mysql+pymysql://user@host/db, duckdb:///file.duckdb. Env: SQLGATE_DB.",
    ),
]


def dump_result(result: RunResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def reviewer_for(yes: bool, as_json: bool = False) -> Any:
    from approvals import ApproveAll, TerminalReviewer

    if yes:
        return ApproveAll()
    if not sys.stdin.isatty():
        fail(
            "there is no terminal to ask for approval on; pass --yes to approve the generated SQL "
            "without review (it is still validated and run read-only)",
            as_json=as_json,
            error_code="no_reviewer",
        )
    return TerminalReviewer(console=err)


def reviewer_actor(reviewer: Any, as_json: bool = False) -> str:
    """The proven name a terminal reviewer decides under (``orchestrator.interfaces.reviewer_identity``);
    ``--yes`` decides unseen, as nobody. Exit 2 when ``SQLGATE_REVIEWER`` claims another name."""
    from approvals import TerminalReviewer
    from orchestrator.interfaces.reviewer_identity import cli_reviewer

    if not isinstance(reviewer, TerminalReviewer):
        return "reviewer"
    try:
        return cli_reviewer()
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        raise


class Spinner:
    """A status line on stderr that follows the pipeline's stages."""

    def __init__(self, enabled: bool) -> None:
        self.status = err.status("starting") if enabled and err.is_terminal else None

    def __enter__(self) -> Spinner:
        if self.status:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status:
            self.status.stop()

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        if self.status is None:
            return
        if stage == "waiting for approval":
            self.status.stop()  # the prompt needs the terminal
        else:
            self.status.update(f"[cyan]{stage}…")
            self.status.start()


ModelOpt = Annotated[str | None, typer.Option(help="Model name. Env: SQLGATE_MODEL.")]
BaseUrlOpt = Annotated[
    str | None, typer.Option(help="OpenAI-compatible endpoint. Env: OPENAI_BASE_URL.")
]
RateOpt = Annotated[
    str | None, typer.Option(help="LLM requests per window, e.g. 5/60 (default) or 500/min.")
]
YesOpt = Annotated[
    bool, typer.Option("--yes", "-y", help="Approve the generated SQL without a prompt.")
]
RowCapOpt = Annotated[
    int | None,
    typer.Option(
        help="Rows kept at most per query (default: the policy's, 1000); more existing is "
        "reported truncated.",
        min=1,
    ),
]
TraceOpt = Annotated[
    bool,
    typer.Option(
        "--trace/--no-trace",
        help="Show the full per-agent trace (default: one line of it per question).",
    ),
]
MaxLimitOpt = Annotated[
    int | None,
    typer.Option(
        help="Rows the safety policy keeps at most per query (default: the policy's, 1000): a "
        "LIMIT of one more is added (or lowered to), and the extra row tells that the result "
        "was cut.",
        min=1,
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(help="Statement timeout in seconds (default: the policy's, 30).", min=0.001),
]
LLMTimeoutOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-timeout",
        metavar="SECONDS",
        help="Seconds one model request may take (default 60). Env: SQLGATE_LLM_TIMEOUT.",
        show_default=False,
    ),
]
LLMAttemptsOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-attempts",
        metavar="N",
        help="Tries of one model request on connection errors, timeouts, 429 and 5xx "
        "(default 4). Env: SQLGATE_LLM_ATTEMPTS.",
        show_default=False,
    ),
]
LLMMaxTokensOpt = Annotated[
    str | None,
    typer.Option(
        "--llm-max-tokens",
        metavar="N|AGENT=N,...",
        help="Reply tokens per question of a model call, for every agent or per agent "
        "(reasoning, sql, correction, answer), e.g. 600,answer=200 (default: no cap sent). "
        "Env: SQLGATE_LLM_MAX_TOKENS.",
        show_default=False,
    ),
]
PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        envvar="SQLGATE_POLICY",
        help="TOML policy file: tables/columns allowed and denied, select_star, max_limit, "
        "row_cap, max_result_bytes, statement_timeout, \\[roles.NAME] sections (see README, 'Safety "
        "policy').",
        show_default=False,
    ),
]
RoleOpt = Annotated[
    str | None,
    typer.Option(help="Judge the questions under this \\[roles.NAME] section of the policy."),
]


def policy_with(
    path: Path | None,
    *,
    row_cap: int | None = None,
    max_limit: int | None = None,
    role: str | None = None,
) -> Any:
    """The policy file (or the default policy), narrowed to ``role``, with the command's own
    row cap and LIMIT over it. Raises ``ConfigurationError`` naming the file and key."""
    from orchestrator.core.config import policy_from_file
    from orchestrator.core.errors import ConfigurationError
    from safety import PolicyError

    policy = policy_from_file(path)
    try:
        policy = policy.for_role(role)
    except PolicyError as exc:
        raise ConfigurationError(f"--role {role}: {exc}") from None
    update: dict[str, Any] = {}
    if row_cap is not None:
        update["row_cap"] = row_cap
    if max_limit is not None:
        update["max_limit"] = max_limit
    return policy.model_copy(update=update) if update else policy


def open_target(
    *,
    db: str | None,
    model: str | None,
    base_url: str | None,
    rate_limit: str | None,
    wait: bool,
    timeout: float | None,
    as_json: bool,
    policy: Path | None = None,
    row_cap: int | None = None,
    max_limit: int | None = None,
    llm_timeout: str | None = None,
    llm_attempts: str | None = None,
    llm_max_tokens: str | None = None,
) -> tuple[Any, Any]:
    """Settings, the read-only database under its policy and the model client, or a clear error
    and exit. Checked in the order a person fixes them: options and files, the model's
    credentials, then the database."""
    from orchestrator.core.config import Settings, llm_settings_from, parse_rate
    from orchestrator.core.json_mode_memory import JsonModeMemory
    from orchestrator.core.limits import build_limiter
    from orchestrator.core.llm import LLMClient

    try:
        settings = Settings.from_env({**os.environ, "SQLGATE_POLICY": ""})
        settings.llm = llm_settings_from(
            os.environ, timeout=llm_timeout, attempts=llm_attempts, max_tokens=llm_max_tokens
        )
        settings.policy = policy_with(policy, row_cap=row_cap, max_limit=max_limit)
        settings.db = db or settings.db
        settings.llm.model = model or settings.llm.model
        settings.llm.base_url = base_url or settings.llm.base_url
        if rate_limit:
            settings.rate_limit, settings.rate_window_s = parse_rate(rate_limit)
        if timeout is not None:
            settings.statement_timeout_s = timeout
        settings.require_credentials()
        database = settings.open_database()
    except SqlgateError as exc:
        fail_with(exc, as_json=as_json)
        raise  # unreachable: _fail exits
    try:
        limiter = build_limiter(settings, mode="wait" if wait else "fail_fast")
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        raise
    return database, LLMClient(
        settings.llm, limiter=limiter, json_mode_memory=JsonModeMemory.in_state_dir()
    )


def terminal_asker(_run_id: str) -> str:
    """Who asks at a terminal: the proven name a reviewer's command would decide under (a
    reviewer token's actor, else the login), so four_eyes compares like with like."""
    from approvals import reviewer_identity
    from orchestrator.interfaces.reviewer_identity import cli_reviewer

    try:
        return cli_reviewer()
    except SqlgateError:  # a broken reviewer token: the login still asked
        return reviewer_identity()


def check_edits_with(reviewer: Any, pipeline: Any, identity: Identity | None = None) -> None:
    """Let a terminal reviewer check an edit on the spot with the pipeline's own validator (its
    row filters bound to the asker's ``identity``): an unsafe edit is refused and asked again,
    not carried to the gate (which checks it again)."""
    from approvals import TerminalReviewer

    if isinstance(reviewer, TerminalReviewer) and reviewer.validate is None:
        reviewer.validate = pipeline.validator(None, identity).validate


def terminal_identity(policy: Policy, as_json: bool = False) -> dict[str, IdentityValue] | None:
    """The attributes of whoever asks at this terminal: those of the token
    ``SQLGATE_REVIEWER_TOKEN`` proves, else none (``cli_asker_identity``). Only asked when
    ``policy`` (or a role of it) filters rows; then exit 2 for a token the registry does not
    accept."""
    from orchestrator.interfaces.reviewer_identity import cli_asker_identity

    if not policy.rows and not any(role.rows for role in policy.roles.values()):
        return None
    try:
        return cli_asker_identity()
    except SqlgateError as exc:
        fail(exc.message, as_json=as_json, error_code=exc.code)
        raise


def show_result(result: RunResult, *, as_json: bool, trace: bool) -> None:
    """A result: JSON on stdout, or the rendered answer (and what to do next, when it waits)."""
    if as_json:
        emit_json(dump_result(result))
        return
    from orchestrator.features.render import render_result

    render_result(terminal_console(), result, trace=trace)
    if result.status.value == "awaiting_approval":
        err.print(
            "Decide with [cyan]sqlgate approvals decide BATCH[/] (see [cyan]sqlgate approvals list[/]), "
            f"then run [cyan]sqlgate resume {result.run_id}[/]."
        )
