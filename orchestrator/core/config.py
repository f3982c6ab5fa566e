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
SQLGATE_LLM_TIMEOUT seconds one model request may take (default 60)
SQLGATE_LLM_ATTEMPTS tries of one model request on connection errors, timeouts, 429 and 5xx
                    (default 4)
SQLGATE_LLM_MAX_TOKENS  reply tokens per question of a call: N, or per agent
                    ``reasoning=N,sql=N,correction=N,answer=N`` (N first for the others);
                    default: no cap sent (the server's own)
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


def parse_llm_timeout(text: str, name: str = "SQLGATE_LLM_TIMEOUT") -> float:
    """Seconds one model request may take: a positive number.

    Example:
        >>> parse_llm_timeout("2.5")
        2.5
    """
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigurationError(f"{name} must be a positive number of seconds, not {text!r}")
    return value


def parse_llm_attempts(text: str, name: str = "SQLGATE_LLM_ATTEMPTS") -> int:
    """Tries of one model request: a whole number of at least 1.

    Example:
        >>> parse_llm_attempts("1")
        1
    """
    if not text.strip().isdigit() or int(text) < 1:
        raise ConfigurationError(f"{name} must be a whole number of at least 1, not {text!r}")
    return int(text)


def parse_max_tokens(
    text: str, name: str = "SQLGATE_LLM_MAX_TOKENS"
) -> tuple[int | None, dict[str, int]]:
    """``"400"`` -> (400, {}); ``"600,sql=300"`` -> (600, {"sql": 300}): reply tokens per
    question of a call, for every agent, and per agent by its setting name.

    Example:
        >>> parse_max_tokens("reasoning=500, answer=200")
        (None, {'reasoning': 500, 'answer': 200})
    """
    from agents.llm_agent import AGENT_SETTINGS

    default: int | None = None
    by_agent: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        agent, _, number = part.rpartition("=")
        agent = agent.strip()
        if (
            not number.strip().isdigit()
            or int(number) < 1
            or (agent and agent not in AGENT_SETTINGS)
        ):
            raise ConfigurationError(
                f"{name} must be a whole number of tokens of at least 1, or AGENT=N pairs with "
                f"AGENT one of {', '.join(AGENT_SETTINGS)}, separated by commas; not {text!r}"
            )
        if agent:
            by_agent[agent] = int(number)
        else:
            default = int(number)
    return default, by_agent


def llm_settings_from(
    env: Mapping[str, str],
    *,
    timeout: str | None = None,
    attempts: str | None = None,
    max_tokens: str | None = None,
) -> LLMSettings:
    """The model settings from the environment, with the command line's values over them
    (``timeout`` etc. are the options' text, named ``--llm-timeout`` etc. in errors)."""
    key = env.get("OPENAI_API_KEY")
    settings = LLMSettings(
        model=env.get("SQLGATE_MODEL") or "gpt-4o-mini",
        base_url=env.get("OPENAI_BASE_URL") or None,
        api_key=SecretStr(key) if key else None,
    )
    for option, variable, value in (
        ("--llm-timeout", "SQLGATE_LLM_TIMEOUT", timeout),
        ("--llm-attempts", "SQLGATE_LLM_ATTEMPTS", attempts),
        ("--llm-max-tokens", "SQLGATE_LLM_MAX_TOKENS", max_tokens),
    ):
        name, text = (option, value) if value is not None else (variable, env.get(variable))
        if text is None or (text.strip() == "" and value is None):
            continue
        if variable == "SQLGATE_LLM_TIMEOUT":
            settings.timeout_s = parse_llm_timeout(text, name)
        elif variable == "SQLGATE_LLM_ATTEMPTS":
            settings.max_attempts = parse_llm_attempts(text, name)
        else:
            settings.max_tokens, settings.max_tokens_by_agent = parse_max_tokens(text, name)
    return settings


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
        llm = llm_settings_from(env)
        tokens = env.get("SQLGATE_TOKEN_LIMIT")
        if tokens is not None and not tokens.strip().isdigit():
            raise ConfigurationError(
                "SQLGATE_TOKEN_LIMIT must be a whole number of tokens per window"
            )
        return cls(
            db=env.get("SQLGATE_DB") or None,
            llm=llm,
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
