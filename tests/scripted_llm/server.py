"""A real HTTP server that speaks the OpenAI chat-completions API with scripted replies.

It stands in for a model when none is reachable: tests (and cassette recordings) talk to it
over a real socket through the real ``openai`` client. Every reply says, in the
``x-sqlgate-scripted-server`` header and in ``system_fingerprint``, that it is scripted.

Example:
    >>> queue = ScriptedQueue([ScriptedReply('{"answer": 42}')])
    >>> with ScriptedLLMServer(queue) as server:
    ...     server.base_url.startswith("http://127.0.0.1:")
    True
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "SCRIPTED_HEADER",
    "SCRIPTED_HEADER_VALUE",
    "ScriptedLLMServer",
    "ScriptedQueue",
    "ScriptedQueueExhausted",
    "ScriptedReply",
]

SCRIPTED_HEADER = "x-sqlgate-scripted-server"
SCRIPTED_HEADER_VALUE = "scripted responses from tests/scripted_llm, not a real model"
SYSTEM_FINGERPRINT = "sqlgate-scripted"
# Fixed values keep recorded cassettes byte-for-byte stable from one recording to the next.
CREATED = 1767225600  # 2026-01-01T00:00:00Z
FIXED_DATE = "Thu, 01 Jan 2026 00:00:00 GMT"
DEFAULT_MODELS = ("scripted-model",)


def _error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}})


def _estimate_tokens(text: str) -> int:
    """About four characters a token, never zero: deterministic and good enough for budgets."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted HTTP reply to a chat-completion request.

    ``content`` becomes ``choices[0].message.content`` of a 200 reply; ``raw_body`` replaces the
    whole body verbatim (used for error bodies). Token counts default to estimates from lengths.
    """

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"

    @classmethod
    def rate_limited(cls, retry_after_s: float) -> ScriptedReply:
        """429 with ``retry-after`` (seconds) and ``retry-after-ms`` headers, as OpenAI sends them."""
        seconds = f"{retry_after_s:g}"
        return cls(
            status=429,
            headers={"retry-after": seconds, "retry-after-ms": str(round(retry_after_s * 1000))},
            raw_body=_error_body(
                f"Rate limit reached for requests. Please try again in {seconds}s.",
                "requests",
                code="rate_limit_exceeded",
            ),
        )

    @classmethod
    def server_error(
        cls, message: str = "The server had an error while processing your request."
    ) -> ScriptedReply:
        """500 with an OpenAI-style error body."""
        return cls(status=500, raw_body=_error_body(message, "server_error"))

    @classmethod
    def bad_request(cls, message: str, param: str | None = None) -> ScriptedReply:
        """400, e.g. a server that does not support ``response_format`` json_schema."""
        return cls(status=400, raw_body=_error_body(message, "invalid_request_error", param=param))

    @classmethod
    def invalid_json(cls, text: str = '{"sql": "SELECT 1",') -> ScriptedReply:
        """A well-formed 200 reply whose message content is not valid JSON."""
        return cls(content=text)

    @classmethod
    def slow(cls, content: str, delay_s: float) -> ScriptedReply:
        """A 200 reply sent only after ``delay_s`` seconds (for client timeouts)."""
        return cls(content=content, delay_s=delay_s)


class ScriptedQueueExhausted(RuntimeError):
    """The scripted queue was asked for more replies than it was given."""

    code = "scripted_queue_exhausted"


class ScriptedQueue:
    """A responder that serves its replies in order, then fails loudly.

    When exhausted it raises :class:`ScriptedQueueExhausted` (the server answers HTTP 500 with
    the message) and records the error in ``errors``, so a test can assert nothing went unseen.
    """

    def __init__(self, replies: Iterable[ScriptedReply]) -> None:
        self._replies = list(replies)
        self._served = 0
        self._lock = threading.Lock()
        self.errors: list[str] = []

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._served

    def __call__(self, request_json: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            if self._served >= len(self._replies):
                message = (
                    f"scripted queue exhausted: all {len(self._replies)} scripted replies were served "
                    f"and request #{self._served + len(self.errors) + 1} has no reply "
                    f"(model={request_json.get('model')!r})"
                )
                self.errors.append(message)
                raise ScriptedQueueExhausted(message)
            reply = self._replies[self._served]
            self._served += 1
            return reply


Responder = Callable[[dict[str, Any]], ScriptedReply]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    # Replies are small and immediate: don't let Nagle's algorithm hold each one back ~40 ms.
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return SYSTEM_FINGERPRINT

    def date_time_string(self, timestamp: float | None = None) -> str:
        return FIXED_DATE

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._untrack(self.connection)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.rstrip("/") == "/v1/models":
            models = [
                {"id": name, "object": "model", "created": CREATED, "owned_by": SYSTEM_FINGERPRINT}
                for name in self.server.owner.models
            ]
            self._send(200, json.dumps({"object": "list", "data": models}))
        else:
            self._not_found()

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return
        try:
            request_json = json.loads(raw or b"null")
            if not isinstance(request_json, dict):
                raise ValueError("the request body is not a JSON object")
        except ValueError as exc:
            self._send(
                400,
                _error_body(f"could not parse the request body: {exc}", "invalid_request_error"),
            )
            return
        owner = self.server.owner
        number = owner._record(request_json)
        try:
            reply = owner.responder(request_json)
        except Exception as exc:  # the responder's failure must reach the client, not vanish
            message = f"scripted responder failed: {type(exc).__name__}: {exc}"
            owner.errors.append(message)
            self._send(
                500, _error_body(message, "scripted_server_error", code=getattr(exc, "code", None))
            )
            return
        if reply.delay_s:
            owner.sleep(reply.delay_s)
        headers = dict(reply.headers)
        if owner.gzip_responses and "gzip" in (self.headers.get("accept-encoding") or ""):
            headers["content-encoding"] = "gzip"
        self._send(reply.status, owner._body_for(reply, request_json, number), headers, number)

    def _not_found(self) -> None:
        self._send(
            404, _error_body(f"no route for {self.command} {self.path}", "invalid_request_error")
        )

    def _send(
        self, status: int, body: str, headers: dict[str, str] | None = None, number: int = 0
    ) -> None:
        payload = body.encode("utf-8")
        if (headers or {}).get("content-encoding") == "gzip":
            payload = gzip.compress(payload, mtime=0)  # mtime=0: the same bytes every time
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.send_header(SCRIPTED_HEADER, SCRIPTED_HEADER_VALUE)
            if number:
                self.send_header("x-request-id", f"req_scripted_{number}")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (e.g. its timeout fired during a slow reply).
            self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedLLMServer


class ScriptedLLMServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1 (a free port) answering from ``responder``.

    ``responder(request_json) -> ScriptedReply`` is called once per chat-completion request.
    ``requests`` keeps every parsed request body; ``errors`` every responder failure.
    ``gzip_responses`` compresses chat-completion replies when the client accepts gzip, as
    hosted APIs do, to exercise recording and replay of compressed bodies.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        models: Iterable[str] = DEFAULT_MODELS,
        gzip_responses: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.responder = responder
        self.models = tuple(models)
        self.gzip_responses = gzip_responses
        self.sleep = sleep
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running; call start() first")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> str:
        """Bind a free port, serve in a background thread, return the ``.../v1`` base URL."""
        if self._httpd is not None:
            return self.base_url
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        # A short poll interval keeps stop() quick; serving itself does not poll.
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-llm-server",
            daemon=True,
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving and close every open connection; safe to call twice."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # keep-alive connections would otherwise outlive the server
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def assert_no_errors(self) -> None:
        """Raise AssertionError listing every responder failure, if any."""
        if self.errors:
            raise AssertionError("scripted server errors:\n" + "\n".join(self.errors))

    def __enter__(self) -> ScriptedLLMServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _record(self, request_json: dict[str, Any]) -> int:
        with self._lock:
            self.requests.append(request_json)
            return len(self.requests)

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _body_for(self, reply: ScriptedReply, request_json: dict[str, Any], number: int) -> str:
        if reply.raw_body is not None:
            return reply.raw_body
        if reply.status != 200:
            return _error_body(reply.content or f"scripted HTTP {reply.status}", "scripted_error")
        content = reply.content
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:
            prompt_tokens = _estimate_tokens(
                json.dumps(request_json.get("messages", []), sort_keys=True)
            )
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = _estimate_tokens(content or "")
        return json.dumps(
            {
                "id": f"chatcmpl-scripted-{number}",
                "object": "chat.completion",
                "created": CREATED,
                "model": request_json.get("model") or self.models[0],
                "system_fingerprint": SYSTEM_FINGERPRINT,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "refusal": None},
                        "logprobs": None,
                        "finish_reason": reply.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )
