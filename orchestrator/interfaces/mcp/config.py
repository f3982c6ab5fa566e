"""What ``sqlgate mcp`` needs: the same database, state database, model and limiter as the rest.

SQLGATE_DB / --db              the database agents ask about (opened read-only)
SQLGATE_STATE_URL              the state database: approvals, run checkpoints, runs and events,
                               shared with ``sqlgate serve`` and ``sqlgate approvals``
SQLGATE_TOKENS_FILE / SQLGATE_TOKENS   bearer tokens with roles, for the HTTP transport
SQLGATE_OIDC_FILE              the identity provider whose JWTs are accepted too, and claims -> roles
SQLGATE_REVIEWER_URL           the reviewer page agents point people to (e.g. the /reviewer page of
                               ``sqlgate serve``); else they are given the ``sqlgate approvals`` command
SQLGATE_MCP_ACTOR              who stdio runs belong to (default: the login name)
OPENAI_BASE_URL, OPENAI_API_KEY, SQLGATE_MODEL, SQLGATE_RATE_LIMIT, ...   as for ``sqlgate ask``
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.errors import ConfigurationError
from orchestrator.core.llm import LLMSettings
from orchestrator.core.pipeline import PipelineConfig
from orchestrator.interfaces.server.auth import TokenRegistry
from orchestrator.interfaces.server.identity import IdentityProvider, identity_from_env
from safety import Policy

REVIEWER_URL_ENV = "SQLGATE_REVIEWER_URL"
ACTOR_ENV = "SQLGATE_MCP_ACTOR"


def login_name() -> str:
    """The OS login this process runs as (what stdio proves about its caller)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "local"


@dataclass
class McpConfig:
    """Everything the MCP server is built from.

    ``limiter`` None: built from the environment. ``tokens`` is needed by the HTTP transport only;
    on stdio the caller is ``actor``, an analyst (stdio has no authentication, so it never decides).
    """

    database_url: str
    state_url: str
    llm: LLMSettings = field(default_factory=LLMSettings)
    limiter: Any = None
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    tokens: TokenRegistry | None = None
    #: The organisation's identity provider (``SQLGATE_OIDC_FILE``), for the HTTP transport.
    identity: IdentityProvider | None = None
    actor: str = field(default_factory=login_name)
    reviewer_url: str | None = None
    #: Ask the human at the client (MCP elicitation) to review, when their token may decide.
    elicit: bool = False
    workers: int = 4
    policy: Policy = field(default_factory=Policy)
    #: replaces the policy's statement timeout when set
    statement_timeout_s: float | None = None
    poll_interval: float = 0.2
    sweep_interval: float = 1.0
    #: ``ask`` returns once the run pauses at the gate or ends, or after this many seconds (the
    #: run then goes on; ``wait_for_run`` follows it).
    ask_wait_s: float = 4.0
    #: While a stage lasts, a waiting tool sends a "still ..." progress notification this often.
    heartbeat_s: float = 5.0
    #: Rows of a result shown in a run's report (``get_rows`` pages through all of them).
    max_rows: int = 50
    http_client: Any = None

    @classmethod
    def from_env(
        cls,
        *,
        db: str | None = None,
        wait: bool = False,
        reviewer_url: str | None = None,
        tokens_file: str | None = None,
        need_tokens: bool = False,
        elicit: bool = False,
        workers: int | None = None,
        policy_file: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> McpConfig:
        """Settings as ``sqlgate ask`` reads them. The limiter fails fast (an agent is told
        ``rate_limited`` with ``retry_after``) unless ``wait``."""
        from orchestrator.core.config import Settings, policy_from_file
        from orchestrator.core.limits import build_limiter
        from orchestrator.core.state_db import default_state_url

        env = os.environ if environ is None else environ
        settings = Settings.from_env(env)
        if policy_file:
            settings.policy = policy_from_file(policy_file)
        settings.db = db or settings.db
        if not settings.db:
            raise ConfigurationError("no database to serve: pass --db URL or set SQLGATE_DB")
        settings.require_credentials()
        tokens: TokenRegistry | None = None
        if tokens_file:
            tokens = TokenRegistry.from_file(tokens_file)
        elif need_tokens:
            tokens = TokenRegistry.from_env(env)
        identity = identity_from_env(env) if need_tokens else None
        if need_tokens and (tokens is None or len(tokens) == 0) and identity is None:
            raise ConfigurationError(
                "the HTTP transport needs bearer tokens: set SQLGATE_TOKENS_FILE (or SQLGATE_TOKENS) "
                'to a JSON list of {"token": ..., "actor": ..., "role": "analyst" | "reviewer" | "admin"}'
            )
        pipeline = settings.pipeline.model_copy(update={"admission": not wait})
        return cls(
            database_url=settings.db,
            state_url=default_state_url(env),
            llm=settings.llm,
            limiter=build_limiter(settings, mode="wait" if wait else "fail_fast"),
            pipeline=pipeline,
            tokens=tokens,
            identity=identity,
            actor=env.get(ACTOR_ENV) or login_name(),
            reviewer_url=reviewer_url or env.get(REVIEWER_URL_ENV) or None,
            elicit=elicit,
            workers=workers or int(env.get("SQLGATE_SERVER_WORKERS", "4")),
            policy=settings.policy,
            statement_timeout_s=settings.statement_timeout_s,
        )
