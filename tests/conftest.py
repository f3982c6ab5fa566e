"""Shared fixtures: service URLs (skip with a reason when unset), corpora, the demo database."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import orchestrator.core.llm
import orchestrator.wiring

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"

# Tests never talk to a real model: they replay cassettes (see tests/orchestrator/conftest.py).
orchestrator.core.llm.ALLOW_MODEL_REQUESTS = False
# The state database keeps the features' stores (``state.memory``), as every entry point wires it.
orchestrator.wiring.wire()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """Keep each phase's report on the test (``item.rep_call``), for fixtures' teardown."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def _private_state_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sqlgate's state folder (shared rate-limit window, approvals) is private to each test."""
    monkeypatch.setenv("SQLGATE_STATE_DIR", str(tmp_path_factory.mktemp("state")))


def _service_url(name: str, what: str) -> str:
    url = os.environ.get(name)
    if not url:
        pytest.skip(f"{name} is not set: no {what} to test against (.ci/run sets it)")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return _service_url("SQLGATE_TEST_POSTGRES_URL", "PostgreSQL server")


@pytest.fixture
def postgres_database(postgres_url: str) -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database on the test server, dropped afterwards.

    Skipped with a reason, like ``postgres_url``, when SQLGATE_TEST_POSTGRES_URL is unset.
    """
    name = f"sqlgate_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield sa.make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


@pytest.fixture(scope="session")
def mysql_url() -> str:
    return _service_url("SQLGATE_TEST_MYSQL_URL", "MySQL/MariaDB server")


@pytest.fixture(scope="session")
def redis_url() -> str:
    return _service_url("SQLGATE_TEST_REDIS_URL", "Redis server")


@pytest.fixture(scope="session")
def corpora() -> Path:
    if not CORPORA.is_dir():
        pytest.skip(f"corpora folder {CORPORA} is absent (a fresh clone has no ../shared/corpora)")
    return CORPORA


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from orchestrator.features.demo.database import build_demo_database

    return build_demo_database(tmp_path_factory.mktemp("demo") / "demo.sqlite")


def reviewer_env(actor: str, role: str = "reviewer") -> dict[str, str]:
    """The environment of a command-line reviewer whose name is proven by a token."""
    import json

    token = f"{actor}-token"
    return {
        "SQLGATE_TOKENS": json.dumps([{"token": token, "actor": actor, "role": role}]),
        "SQLGATE_REVIEWER_TOKEN": token,
    }


def as_reviewer(monkeypatch: pytest.MonkeyPatch, actor: str, role: str = "reviewer") -> None:
    """Decide at the command line as ``actor``, proven by a reviewer token."""
    monkeypatch.delenv("SQLGATE_TOKENS_FILE", raising=False)
    for name, value in reviewer_env(actor, role).items():
        monkeypatch.setenv(name, value)
