"""Configuration: environment variables first, command-line options over them.

OPENAI_API_KEY      key for the OpenAI-compatible endpoint (never logged, never recorded)
OPENAI_BASE_URL     endpoint, e.g. http://localhost:11434/v1 for Ollama (default: OpenAI)
SQLGATE_MODEL       model name (default gpt-4o-mini)
SQLGATE_DB          database URL used when --db is not given
SQLGATE_RATE_LIMIT  requests per window, e.g. "5/60" (5 per 60 s, the default) or "500/min"
SQLGATE_POLICY      a TOML policy file: which tables and columns may be read, SELECT *, LIMIT,
                    row cap, timeout, per-role sections (``safety.policy_file``; --policy)
SQLGATE_STATEMENT_TIMEOUT  seconds a query may run (default: the policy's, 30)
SQLGATE_TOKEN_LIMIT tokens per rate window as well (estimated, then corrected by the reply)
SQLGATE_RATE_BACKEND where the window is kept: a SQLite file in the state folder (default),
                    memory, another file path, postgresql://... or redis://...
SQLGATE_STATE_DIR   sqlgate's state folder (default ~/.local/state/sqlgate)
SQLGATE_APPROVAL_TTL     seconds a deferred approval batch may wait before it is rejected
SQLGATE_APPROVAL_QUORUM  distinct reviewers a deferred batch needs (default 1)
SQLGATE_LEASE       seconds a process's claim on a run lasts unrenewed (default 30): a stopped
                    process's runs are taken over after this
SQLGATE_DESCRIPTIONS  a descriptions file (sqlgate YAML, dbt schema.yml or manifest.json) adding
                    table and column descriptions to what the database's comments say
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, SecretStr

from agents.descriptions import Descriptions, load_descriptions
from agents.errors import DescriptionsError
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.lease import DEFAULT_LEASE_S
from orchestrator.core.llm import LLMSettings
from orchestrator.core.pipeline_config import PipelineConfig
from safety import Policy, PolicyError, load_policy

if TYPE_CHECKING:
    from orchestrator.core.database import TargetDatabase

_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}


def parse_rate(text: str) -> tuple[int, float]:
    """``"5/60"`` -> (5, 60.0); ``"500/min"`` -> (500, 60.0); ``"10/2.5s"`` -> (10, 2.5).

    Example:
        >>> parse_rate("5/min")
        (5, 60.0)
    """
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]*)\s*", text or "")
    if not match or (match.group(2) is None and not match.group(3)):
        raise ConfigurationError(
            f"rate limit {text!r} is not N/SECONDS or N/UNIT (e.g. 5/60, 500/min)"
        )
    count = int(match.group(1))
    amount = float(match.group(2)) if match.group(2) else 1.0
    unit = match.group(3) or "s"
    if unit not in _UNITS:
        raise ConfigurationError(
            f"unknown time unit {unit!r} in rate limit {text!r}; use s, min or h"
        )
    window = amount * _UNITS[unit]
    if count < 1 or window <= 0:
        raise ConfigurationError(
            f"rate limit {text!r} must allow at least 1 request per positive window"
        )
    return count, window


class Settings(BaseModel):
    db: str | None = None
    llm: LLMSettings = Field(default_factory=LLMSettings)
    rate_limit: int = 5
    rate_window_s: float = 60.0
    rate_mode: Literal["fail_fast", "wait"] = "fail_fast"
    max_wait_s: float = 600.0
    token_limit: int | None = None
    rate_backend: str | None = None
    #: replaces the policy's statement timeout when set (SQLGATE_STATEMENT_TIMEOUT, --timeout)
    statement_timeout_s: float | None = None
    policy: Policy = Field(default_factory=Policy)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    #: table and column descriptions from a file (SQLGATE_DESCRIPTIONS)
    descriptions: Descriptions | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        limit, window = parse_rate(env.get("SQLGATE_RATE_LIMIT", "5/60"))
        try:
            text = env.get("SQLGATE_STATEMENT_TIMEOUT")
            timeout = float(text) if text else None
        except ValueError as exc:
            raise ConfigurationError(
                "SQLGATE_STATEMENT_TIMEOUT must be a number of seconds"
            ) from exc
        if timeout is not None and timeout <= 0:
            raise ConfigurationError("SQLGATE_STATEMENT_TIMEOUT must be a positive number")
        policy = policy_from_file(env.get("SQLGATE_POLICY") or None)
        descriptions = descriptions_from_file(env.get("SQLGATE_DESCRIPTIONS") or None)
        try:
            ttl = float(env["SQLGATE_APPROVAL_TTL"]) if env.get("SQLGATE_APPROVAL_TTL") else None
            quorum = int(env.get("SQLGATE_APPROVAL_QUORUM") or 1)
            lease = float(env.get("SQLGATE_LEASE") or DEFAULT_LEASE_S)
            pipeline = PipelineConfig(approval_ttl_s=ttl, approval_quorum=quorum, lease_s=lease)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(
                "SQLGATE_APPROVAL_TTL and SQLGATE_LEASE must be positive numbers of seconds and "
                "SQLGATE_APPROVAL_QUORUM a whole number of at least 1"
            ) from exc
        key = env.get("OPENAI_API_KEY")
        tokens = env.get("SQLGATE_TOKEN_LIMIT")
        if tokens is not None and not tokens.strip().isdigit():
            raise ConfigurationError(
                "SQLGATE_TOKEN_LIMIT must be a whole number of tokens per window"
            )
        return cls(
            db=env.get("SQLGATE_DB") or None,
            llm=LLMSettings(
                model=env.get("SQLGATE_MODEL") or "gpt-4o-mini",
                base_url=env.get("OPENAI_BASE_URL") or None,
                api_key=SecretStr(key) if key else None,
            ),
            rate_limit=limit,
            rate_window_s=window,
            statement_timeout_s=timeout,
            policy=policy,
            token_limit=int(tokens) if tokens else None,
            rate_backend=env.get("SQLGATE_RATE_BACKEND") or None,
            pipeline=pipeline,
            descriptions=descriptions,
        )

    def open_database(self) -> TargetDatabase:
        """The target database of these settings, under their policy (and timeout)."""
        from orchestrator.core.database import TargetDatabase

        return TargetDatabase(
            self.db or "",
            policy=self.policy,
            statement_timeout_s=self.statement_timeout_s,
            descriptions=self.descriptions,
        )

    def require_credentials(self) -> None:
        """The official endpoint needs a key; a local server (Ollama, vLLM, ...) may not."""
        if self.llm.api_key is None and self.llm.base_url is None:
            raise ConfigurationError(
                "OPENAI_API_KEY is not set. Set it for OpenAI, or set OPENAI_BASE_URL to another "
                "OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio). "
                "To try sqlgate without a model, run: sqlgate demo"
            )


def descriptions_from_file(path: str | Path | None) -> Descriptions | None:
    """The descriptions in ``path`` (None for None); a malformed file is one
    ``ConfigurationError`` naming the file and the key."""
    if path is None:
        return None
    try:
        return load_descriptions(path)
    except DescriptionsError as exc:
        raise ConfigurationError(exc.message) from None


def policy_from_file(path: str | Path | None) -> Policy:
    """The policy in ``path`` (``Policy()`` for None); a malformed file is one
    ``ConfigurationError`` naming the file and the key."""
    if path is None:
        return Policy()
    try:
        return load_policy(path)
    except PolicyError as exc:
        raise ConfigurationError(f"{path}: {exc}") from None
