"""A real sqlgate server on 127.0.0.1 per test (uvicorn in a thread, as httpx's own tests do),
answering from the demo database with the scripted OpenAI-compatible server as its model."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

import orchestrator.core.llm
from orchestrator.core.llm import LLMSettings
from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
from ratelimit import SlidingWindowLimiter
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer

TOKENS = [
    {"token": "tok-alice", "actor": "alice", "role": "analyst"},
    {"token": "tok-bob", "actor": "bob", "role": "analyst"},
    {"token": "tok-rita", "actor": "rita", "role": "reviewer"},
    {"token": "tok-ravi", "actor": "ravi", "role": "reviewer"},
    {"token": "tok-root", "actor": "root", "role": "admin"},
]


def auth(actor: str) -> dict[str, str]:
    return {"Authorization": f"Bearer tok-{actor}"}


class ThreadedServer(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # not the main thread
        pass


@dataclass
class Running:
    base_url: str
    app: Any
    state_url: str

    def client(self, actor: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = auth(actor) if actor else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=30.0, **kwargs)


def start_server(app: Any) -> tuple[ThreadedServer, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = ThreadedServer(
        uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the sqlgate server did not start")
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{port}"


def stop_server(server: ThreadedServer, thread: threading.Thread) -> None:
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def allow_scripted_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model is the scripted server on 127.0.0.1: live requests to it are allowed here."""
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)


@pytest.fixture
def scripted_model(allow_scripted_model: None) -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        yield server


def make_config(
    demo_db: Path, state_url: str, model: ScriptedLLMServer, **overrides: Any
) -> ServerConfig:
    values: dict[str, Any] = dict(
        database_url=f"sqlite:///{demo_db}",
        state_url=state_url,
        tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
        llm=LLMSettings(model="sqlgate-scripted", base_url=model.base_url, max_attempts=1),
        limiter=SlidingWindowLimiter(limit=100_000, window=60.0, mode="wait"),
        poll_interval=0.05,
        sweep_interval=0.2,
        keepalive=1.0,
    )
    values.update(overrides)
    return ServerConfig(**values)


@pytest.fixture
def state_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.sqlite'}"


@pytest.fixture
def live(demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer) -> Iterator[Running]:
    app = create_app(make_config(demo_db, state_url, scripted_model))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)
