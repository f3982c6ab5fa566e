"""Backends for the ratelimit conformance suite: memory and SQLite always, PostgreSQL and Redis
when ``SQLGATE_TEST_POSTGRES_URL`` / ``SQLGATE_TEST_REDIS_URL`` are set."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

# the helper modules beside this file (windows, ratelimit_workers) import under any import mode
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ratelimit_workers import open_backend  # noqa: E402

from ratelimit import MemoryBackend

BACKENDS = ("memory", "sqlite", "postgres", "redis")
ENV = {"postgres": "SQLGATE_TEST_POSTGRES_URL", "redis": "SQLGATE_TEST_REDIS_URL"}


class BackendFactory:
    """Builds backend instances that share one storage, as separate processes would."""

    def __init__(self, kind: str, tmp_path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.url = os.environ.get(ENV[kind]) if kind in ENV else None
        self.key = f"test-{uuid.uuid4().hex[:12]}"
        self._memory: dict[int, MemoryBackend] = {}
        self._made: list = []

    @property
    def shared(self) -> bool:
        """True when separate processes can share this storage."""
        return self.kind != "memory"

    @property
    def location(self) -> str:
        """What a child process needs to open the same storage."""
        return str(self.tmp_path / "limits.sqlite") if self.kind == "sqlite" else str(self.url)

    def __call__(self, clock=None):
        if self.kind == "memory":
            backend = self._memory.setdefault(id(clock), MemoryBackend(clock=clock))
        else:
            backend = open_backend(self.kind, self.location, clock=clock)
        backend.setup()
        self._made.append(backend)
        return backend

    def close(self) -> None:
        for backend in self._made:
            try:
                backend.clear(self.key)
            finally:
                backend.close()


def _factory(request, tmp_path, kind):
    if kind in ENV and not os.environ.get(ENV[kind]):
        pytest.skip(f"{ENV[kind]} is not set; the {kind} backend is not tested")
    factory = BackendFactory(kind, tmp_path)
    request.addfinalizer(factory.close)
    return factory


@pytest.fixture(params=BACKENDS)
def make_backend(request, tmp_path):
    """Every backend in turn; call it (optionally with a clock) for an instance."""
    return _factory(request, tmp_path, request.param)


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def make_shared_backend(request, tmp_path):
    """Every backend that processes can share."""
    return _factory(request, tmp_path, request.param)
