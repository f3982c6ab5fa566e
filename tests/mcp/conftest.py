"""MCP server tests: the SDK's own client over stdio (a subprocess) and streamable HTTP.

The model is ``CassetteModelServer``: it replays ``cassettes/<module>/<test>.yaml`` over a real
local socket. To record again (against the scripted server): ``pytest tests/mcp
--record-mode=rewrite`` (or ``once`` for missing cassettes only).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import orchestrator.core.llm
from tests.conftest import ROOT
from tests.mcp.model_server import CassetteModelServer
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer

CASSETTES = ROOT / "cassettes"
SCRIPTED_MODEL = "sqlgate-scripted"


@pytest.fixture
def model(request: pytest.FixtureRequest, record_mode: str) -> Iterator[CassetteModelServer]:
    """The model endpoint: this test's cassette replayed (or recorded from the scripted server)."""
    module = request.module.__name__.split(".")[-1]
    cassette = CASSETTES / module / f"{request.node.name}.yaml"
    record = str(record_mode) in ("all", "rewrite", "RecordMode.ALL", "RecordMode.REWRITE") or (
        str(record_mode) in ("once", "new_episodes", "RecordMode.ONCE") and not cassette.exists()
    )
    if record:
        with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as upstream:
            server = CassetteModelServer(cassette, upstream.base_url)
            yield server
            server.close()
        return
    if not cassette.exists():
        pytest.fail(f"no cassette {cassette}: record it with --record-mode=once")
    server = CassetteModelServer(cassette)
    yield server
    server.close()


@pytest.fixture
def allow_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model is the local cassette server: requests to it are allowed."""
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)


@pytest.fixture
def state_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.sqlite'}"


def sqlgate_env(
    demo_db: Path, state_url: str, base_url: str, tmp_path: Path, **extra: str
) -> dict[str, str]:
    """The environment of a ``sqlgate`` subprocess: its database, state, model and limits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SQLGATE_"))}
    env.update(
        SQLGATE_DB=f"sqlite:///{demo_db}",
        SQLGATE_STATE_URL=state_url,
        SQLGATE_STATE_DIR=str(tmp_path / "state-dir"),
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="replayed",
        SQLGATE_MODEL=SCRIPTED_MODEL,
        SQLGATE_RATE_LIMIT="5/60",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


def sqlgate(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
