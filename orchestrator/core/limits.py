"""The LLM rate limiter sqlgate's commands share: which limits, kept where.

By default the window is kept in a SQLite file in sqlgate's state folder, so every ``sqlgate``
process on the machine shares one budget per endpoint; ``SQLGATE_RATE_BACKEND`` moves it to
PostgreSQL or Redis (several machines sharing one provider account) or keeps it in memory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

from orchestrator.core.config import Settings
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.extras import needing
from orchestrator.core.state_folder import state_dir
from ratelimit import (
    Limit,
    Limits,
    MemoryBackend,
    RequestLimit,
    SlidingWindowLimiter,
    SQLiteBackend,
    TokenLimit,
)


def backend_for(spec: str | None) -> Any:
    """``memory``, a SQLite file path, ``postgresql://...`` or ``redis://...``."""
    if spec is None or spec == "":
        folder = state_dir()
        folder.mkdir(parents=True, exist_ok=True)
        return SQLiteBackend(folder / "ratelimit.sqlite")
    if spec == "memory":
        return MemoryBackend()
    if spec.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
        return needing("the rate-limit window in PostgreSQL", lambda: _postgres_backend(spec))
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return needing("the rate-limit window in Redis", lambda: _redis_backend(spec))
    if "://" in spec:
        raise ConfigurationError(
            f"SQLGATE_RATE_BACKEND {spec!r}: use memory, a file path, postgresql:// or redis://"
        )
    return SQLiteBackend(Path(spec).expanduser())


def _postgres_backend(spec: str) -> Any:
    from ratelimit.backends.postgres import PostgresBackend

    return PostgresBackend(spec)


def _redis_backend(spec: str) -> Any:
    from ratelimit.backends.redis import RedisBackend

    return RedisBackend(spec)


def budget_key(settings: Settings) -> str:
    """One budget per endpoint and key: the provider limits accounts, not processes."""
    account = settings.llm.api_key.get_secret_value() if settings.llm.api_key else ""
    digest = hashlib.sha256(account.encode()).hexdigest()[:12]  # never the key itself
    return f"llm:{settings.llm.base_url or 'https://api.openai.com/v1'}:{digest}"


def build_limiter(
    settings: Settings, *, mode: Literal["fail_fast", "wait"]
) -> SlidingWindowLimiter:
    limits: Limit | Limits = RequestLimit(settings.rate_limit, settings.rate_window_s)
    if settings.token_limit:
        limits = limits & TokenLimit(settings.token_limit, settings.rate_window_s)
    return SlidingWindowLimiter(
        limits=limits,
        key=budget_key(settings),
        backend=backend_for(settings.rate_backend),
        mode=mode,
        max_wait=settings.max_wait_s,
    )
