"""Shared fixtures: service URLs (skip with a reason when unset), corpora, the demo database."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import orchestrator.llm

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"

# Tests never talk to a real model: they replay cassettes (see tests/orchestrator/conftest.py).
orchestrator.llm.ALLOW_MODEL_REQUESTS = False


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
    from orchestrator.demo.database import build_demo_database

    return build_demo_database(tmp_path_factory.mktemp("demo") / "demo.sqlite")
