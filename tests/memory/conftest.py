"""Memory tests run on every state database: SQLite always, PostgreSQL when its URL is set."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import MemoryScope, MemoryStore

#: A small schema for scopes built by hand.
SHOP = {
    "orders": [
        ("order_id", "INTEGER"),
        ("customer_id", "INTEGER"),
        ("order_date", "DATE"),
        ("status", "TEXT"),
    ],
    "customers": [("customer_id", "INTEGER"), ("name", "TEXT"), ("email", "TEXT")],
}
POLICY = {"max_limit": 1000, "star": "reject"}


class Clock:
    """A settable UTC clock for the store (no sleeping)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)  # every write gets its own moment
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest.fixture
def state(state_url: str) -> Iterator[StateDatabase]:
    db = StateDatabase(state_url)
    db.setup()
    yield db
    db.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(state: StateDatabase, clock: Clock) -> MemoryStore:
    return MemoryStore(state.engine, clock=clock)


@pytest.fixture
def scope() -> MemoryScope:
    return MemoryScope.of("sqlite:///shop.db", "sqlite", SHOP, POLICY)


# Cassette replay, as for the orchestrator's tests (same configuration, same guard).
from tests.orchestrator.conftest import (  # noqa: E402
    _replay_guard,
    demo_url,
    vcr_cassette_dir,
    vcr_config,
)

__all__ = ["Clock", "_replay_guard", "demo_url", "vcr_cassette_dir", "vcr_config"]
