"""Memory tests run on every state database: SQLite always, PostgreSQL when its URL is set."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from orchestrator.memory import MemoryScope, MemoryStore
from orchestrator.state_db import StateDatabase

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
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.sqlite3'}"
        return
    base = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("SQLGATE_TEST_POSTGRES_URL is not set: no PostgreSQL state database")
    name = f"sqlgate_memory_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield sa.make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


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
