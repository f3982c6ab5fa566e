"""What ``sqlgate serve`` needs: the target database, the state database, tokens, the model.

SQLGATE_DB / --db          the database analysts ask about (opened read-only)
SQLGATE_POLICY / --policy  what questions may read; [roles.analyst] etc. narrow it per token role
SQLGATE_STATE_URL          state database shared by every server process (default: SQLite file
                           in the state folder); approvals, run checkpoints, run events
SQLGATE_TOKENS_FILE / SQLGATE_TOKENS   bearer tokens with roles (see ``orchestrator.interfaces.server.auth``)
SQLGATE_OIDC_FILE                      the identity provider whose JWTs are accepted too, and claims
                                       -> roles (see ``orchestrator.interfaces.auth.settings``)
OPENAI_BASE_URL, OPENAI_API_KEY, SQLGATE_MODEL, SQLGATE_RATE_LIMIT, ...   as for ``sqlgate ask``
SQLGATE_SERVER_WORKERS     runs executed at once per process (default 4)
SQLGATE_MAX_BODY_BYTES     largest request body accepted, in bytes (default 1 MiB); larger: 413
SQLGATE_WEBHOOK_URLS, SQLGATE_WEBHOOK_SECRET, SQLGATE_PUBLIC_URL, SQLGATE_SMTP_URL, ...
                           notifications (see ``orchestrator.features.notify.notifier``)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from orchestrator.core.errors import ConfigurationError
from orchestrator.core.llm import LLMSettings
from orchestrator.core.pipeline import PipelineConfig
from orchestrator.features.notify.notifier import NotificationSettings
from orchestrator.interfaces.server.auth import TokenRegistry
from orchestrator.interfaces.server.identity import IdentityProvider, identity_from_env
from safety import Policy


@dataclass
class ServerConfig:
    """Everything the app is built from. ``limiter`` None: built from the environment (wait mode)."""

    database_url: str
    state_url: str
    tokens: TokenRegistry
    #: The organisation's identity provider (``SQLGATE_OIDC_FILE``), beside the static tokens.
    identity: IdentityProvider | None = None
    llm: LLMSettings = field(default_factory=LLMSettings)
    limiter: Any = None
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    workers: int = 4
    policy: Policy = field(default_factory=Policy)
    #: replaces the policy's statement timeout when set
    statement_timeout_s: float | None = None
    poll_interval: float = 0.2
    sweep_interval: float = 1.0
    keepalive: float = 15.0
    http_client: Any = None
    max_body_bytes: int = 1_048_576
    notifications: NotificationSettings = field(default_factory=NotificationSettings)

    @classmethod
    def from_env(
        cls,
        *,
        db: str | None = None,
        tokens_file: str | None = None,
        workers: int | None = None,
        policy_file: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ServerConfig:
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
        tokens = (
            TokenRegistry.from_file(tokens_file) if tokens_file else TokenRegistry.from_env(env)
        )
        identity = identity_from_env(env)
        if len(tokens) == 0 and identity is None:
            raise ConfigurationError(
                "no tokens configured: set SQLGATE_TOKENS_FILE (or SQLGATE_TOKENS) to a JSON list of "
                '{"token": ..., "actor": ..., "role": "analyst" | "reviewer" | "admin"}, or '
                "SQLGATE_OIDC_FILE to an identity-provider file"
            )
        return cls(
            database_url=settings.db,
            state_url=default_state_url(env),
            tokens=tokens,
            identity=identity,
            llm=settings.llm,
            limiter=build_limiter(settings, mode="wait"),
            pipeline=settings.pipeline,
            workers=workers or int(env.get("SQLGATE_SERVER_WORKERS", "4")),
            policy=settings.policy,
            statement_timeout_s=settings.statement_timeout_s,
            max_body_bytes=_positive_int(env, "SQLGATE_MAX_BODY_BYTES", 1_048_576),
            notifications=NotificationSettings.from_env(env),
        )


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name)
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be a whole number, not {text!r}") from None
    if value < 1:
        raise ConfigurationError(f"{name} must be at least 1, not {value}")
    return value
