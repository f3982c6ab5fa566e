"""Two MCP clients behind one small interface, so one scenario suite drives both: the Python SDK's
``Client`` and the official TypeScript SDK's ``Client`` (``ts-client/driver.mjs``, a Node process
fed JSON lines), each over stdio (``sqlgate mcp`` as a subprocess) or streamable HTTP.

Every answer is plain JSON in the wire's spelling (``isError``, ``structuredContent``), with the
progress notifications the call received and how long it took.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx2
from anyio.abc import Process
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conftest import ROOT

TS_CLIENT = Path(__file__).parent / "ts-client"
#: The TypeScript SDK's own default request timeout: every tool must answer within it.
CLIENT_PATIENCE_S = 60.0


class Driver(Protocol):
    name: str

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def read_resource(self, uri: str) -> dict[str, Any]: ...

    async def notifications(self) -> list[str]: ...


def node_ready() -> str | None:
    """Why the TypeScript client cannot run here (None when it can): node and npm present, and
    the pinned SDK installed with ``npm ci`` (done once per checkout)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are not installed: the TypeScript SDK client cannot run"
    if not (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"],
            cwd=TS_CLIENT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"npm ci failed in {TS_CLIENT}: {done.stderr[-2000:]}")
    return None


class PythonDriver:
    def __init__(self, client: Client, name: str, notes: list[str] | None = None) -> None:
        self.client = client
        self.name = name
        self.notes = notes if notes is not None else []

    async def notifications(self) -> list[str]:
        """The change notifications received since the last call."""
        got = [n for n in self.notes if n.endswith("list_changed")]
        self.notes.clear()
        return got

    async def list_tools(self) -> list[dict[str, Any]]:
        tools = (await self.client.list_tools()).tools
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        progress: list[dict[str, Any]] = []

        async def record(value: float, total: float | None, message: str | None) -> None:
            progress.append({"progress": value, "message": message})

        started = time.monotonic()
        with anyio.fail_after(CLIENT_PATIENCE_S):
            result = await self.client.call_tool(tool, arguments, progress_callback=record)
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        answer.setdefault("isError", False)
        return {**answer, "progress": progress, "elapsed_s": time.monotonic() - started}

    async def read_resource(self, uri: str) -> dict[str, Any]:
        try:
            read = await self.client.read_resource(uri)
        except MCPError as exc:
            return {"error": {"code": exc.error.code, "message": exc.error.message}}
        return read.model_dump(mode="json", by_alias=True, exclude_none=True)


class NodeDriver:
    """The TypeScript SDK client in a Node process; one JSON line per request and answer."""

    def __init__(self, process: Process, name: str) -> None:
        self.process = process
        self.name = name
        self._next = 0
        self._buffer = b""

    async def _ask(self, request: dict[str, Any]) -> Any:
        self._next += 1
        assert self.process.stdin is not None and self.process.stdout is not None
        await self.process.stdin.send((json.dumps({"id": self._next, **request}) + "\n").encode())
        with anyio.fail_after(CLIENT_PATIENCE_S + 10):
            while b"\n" not in self._buffer:
                self._buffer += await self.process.stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        answer = json.loads(line)
        assert answer["id"] == self._next
        if not answer["ok"]:
            raise ClientFailure(answer["error"])
        return answer["result"]

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = await self._ask({"op": "list_tools"})
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = await self._ask(
            {"op": "call", "name": tool, "arguments": arguments}
        )
        answer.setdefault("isError", False)
        return answer

    async def notifications(self) -> list[str]:
        got: list[str] = await self._ask({"op": "notifications"})
        return got

    async def read_resource(self, uri: str) -> dict[str, Any]:
        try:
            read: dict[str, Any] = await self._ask({"op": "read_resource", "uri": uri})
        except ClientFailure as exc:
            return {"error": exc.error}
        return read


class ClientFailure(Exception):
    """The client itself failed the request (a protocol error, or a result it rejected)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


def stdio_command() -> tuple[str, list[str]]:
    return sys.executable, ["-m", "orchestrator.cli", "mcp"]


@asynccontextmanager
async def python_stdio(env: dict[str, str], stderr: Path) -> AsyncIterator[PythonDriver]:
    command, args = stdio_command()
    with stderr.open("w") as errlog:
        transport = stdio_client(
            StdioServerParameters(command=command, args=args, env=env, cwd=ROOT), errlog=errlog
        )
        async with Client(transport, read_timeout_seconds=CLIENT_PATIENCE_S) as client:
            yield PythonDriver(client, "python-stdio")


@asynccontextmanager
async def python_http(url: str, token: str, *, legacy: bool = False) -> AsyncIterator[PythonDriver]:
    """``legacy``: a handshake-era session (as the TypeScript SDK opens), which receives change
    notifications on its stream; else the SDK's default."""
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=CLIENT_PATIENCE_S),
    )
    notes: list[str] = []

    async def on_message(message: Any) -> None:
        if not isinstance(message, Exception):
            notes.append(str(getattr(message, "method", "")))

    options: dict[str, Any] = {"mode": "legacy"} if legacy else {}
    async with Client(
        streamable_http_client(url, http_client=http),
        read_timeout_seconds=CLIENT_PATIENCE_S,
        message_handler=on_message,
        **options,
    ) as client:
        yield PythonDriver(client, "python-http", notes)


@asynccontextmanager
async def node(config: dict[str, Any], name: str) -> AsyncIterator[NodeDriver]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SQLGATE_"))}
    process = await anyio.open_process(
        ["node", str(TS_CLIENT / "driver.mjs"), json.dumps(config)],
        cwd=TS_CLIENT,
        env=env,
        stderr=None,
    )
    try:
        yield NodeDriver(process, name)
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


def node_stdio(env: dict[str, str], stderr: Path) -> Any:
    command, args = stdio_command()
    config = {
        "transport": "stdio",
        "command": command,
        "args": args,
        "env": env,
        "cwd": str(ROOT),
        "stderr": str(stderr),
    }
    return node(config, "typescript-stdio")


def node_http(url: str, token: str) -> Any:
    return node({"transport": "http", "url": url, "token": token}, "typescript-http")
