"""A real local OpenAI-compatible HTTP server that answers from a recorded cassette.

An MCP server in a subprocess cannot be patched by VCR.py, so its model traffic goes to this
server over a real socket: replaying, it answers each request with sqlgate's own
``CassetteTransport`` (method, path and body must match; each recording plays once); recording,
it forwards each request to the scripted OpenAI-compatible server (tests/scripted_llm) and writes
what it got in VCR.py's cassette layout, saying at the top and in every reply's
``x-sqlgate-scripted-server`` header that the replies are scripted, not a real model's.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import yaml

from orchestrator.core.replay import CassetteTransport

RECORDED_HOST = "http://llm.recorded"
SCRIPTED_NOTE = (
    "Replies recorded from sqlgate's scripted OpenAI-compatible server (tests/scripted_llm): "
    "scripted responses, not a real model's."
)
_KEPT_RESPONSE_HEADERS = ("content-type", "x-sqlgate-scripted-server", "retry-after")


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        status, headers, content = self.server.owner.answer(self.command, self.path, body)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("content-length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: CassetteModelServer


class CassetteModelServer:
    """Replays ``cassette`` (``upstream`` None) or records it from ``upstream`` (a base URL).

    ``delay_s``: each reply waits this long first (a slow model, for long runs)."""

    def __init__(self, cassette: Path, upstream: str | None = None, delay_s: float = 0.0) -> None:
        self.cassette = cassette
        self.upstream = upstream
        self.delay_s = delay_s
        self.transport = None if upstream else CassetteTransport([cassette])
        self.recorded: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def recording(self) -> bool:
        return self.upstream is not None

    def answer(
        self, method: str, path: str, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        request = httpx2.Request(
            method, RECORDED_HOST + path, content=body, headers={"content-type": "application/json"}
        )
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.transport is not None:
            try:
                response = self.transport.handle_request(request)
            except Exception as exc:  # a replay miss: the test fails on it at the end
                with self._lock:
                    self.failures.append(str(exc))
                return 599, [("content-type", "text/plain")], str(exc).encode()
            return response.status_code, list(response.headers.multi_items()), response.read()
        assert self.upstream is not None
        upstream = self.upstream.removesuffix("/v1")
        with httpx2.Client(timeout=30.0) as client:
            response = client.request(
                method, upstream + path, content=body, headers={"content-type": "application/json"}
            )
        kept = {
            name: [value]
            for name, value in response.headers.items()
            if name.lower() in _KEPT_RESPONSE_HEADERS
        }
        with self._lock:
            self.recorded.append(
                {
                    "request": {
                        "method": method,
                        "uri": RECORDED_HOST + path,
                        "body": body.decode("utf-8"),
                        "headers": {"content-type": ["application/json"]},
                    },
                    "response": {
                        "status": {"code": response.status_code, "message": response.reason_phrase},
                        "headers": kept,
                        "body": {"string": response.text},
                    },
                }
            )
        return response.status_code, [(k, v[0]) for k, v in kept.items()], response.content

    def close(self) -> None:
        """Stop serving; write the cassette (recording) or check every recording played."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self.recording:
            self.cassette.parent.mkdir(parents=True, exist_ok=True)
            data = {"recorded_from": SCRIPTED_NOTE, "interactions": self.recorded, "version": 1}
            self.cassette.write_text(yaml.safe_dump(data, sort_keys=False, width=100))
            return
        assert not self.failures, "replay misses: " + "; ".join(self.failures)
        assert self.transport is not None
        self.transport.assert_all_played()
