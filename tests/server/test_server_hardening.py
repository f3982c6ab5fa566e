"""The web surface's walls: security headers everywhere, the token and role before the body,
bodies over the limit refused before they are read, /health without internals, a Last-Event-ID
from the future answered with a resync, tokens that expire."""

from __future__ import annotations

import hmac
import json
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from orchestrator.interfaces.server import TokenConfigError, TokenExpired, TokenRegistry, create_app
from orchestrator.interfaces.server.events import Cursor
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import TOKENS, Running, make_config, start_server, stop_server
from tests.server.server_helpers import read_events

FRAME_ANCESTORS = "frame-ancestors 'none'"


def assert_secured(response_headers: dict[str, str], what: str) -> None:
    headers = {k.lower(): v for k, v in response_headers.items()}
    assert FRAME_ANCESTORS in headers.get("content-security-policy", ""), what
    assert headers.get("x-frame-options") == "DENY", what
    assert headers.get("x-content-type-options") == "nosniff", what
    assert headers.get("referrer-policy") == "no-referrer", what


# -- raw HTTP/1.1, to control exactly what is sent and when ---------------------------------------


def _connect(base_url: str) -> socket.socket:
    parts = urlsplit(base_url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    return sock


def _head(method: str, path: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        "Host: 127.0.0.1",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(status_line.split()[1]), headers, body


# -- headers --------------------------------------------------------------------------------------


def test_every_page_and_api_answer_carries_the_security_headers(live: Running) -> None:
    with live.client() as anonymous, live.client("alice") as alice, live.client("rita") as rita:
        answers = {
            "GET /": anonymous.get("/", follow_redirects=False),
            "GET /analyst": anonymous.get("/analyst"),
            "GET /reviewer": anonymous.get("/reviewer"),
            "GET /static/app.css": anonymous.get("/static/app.css"),
            "GET /static/reviewer.js": anonymous.get("/static/reviewer.js"),
            "GET /health": anonymous.get("/health"),
            "GET /openapi.json": anonymous.get("/openapi.json"),
            "GET /docs": anonymous.get("/docs"),
            "GET /me 401": anonymous.get("/me"),
            "GET /me": alice.get("/me"),
            "GET /runs": alice.get("/runs"),
            "GET /runs/x 404": alice.get("/runs/run_x"),
            "POST /runs 422": alice.post("/runs", json={}),
            "GET /approvals 403": alice.get("/approvals"),
            "GET /approvals": rita.get("/approvals"),
            "GET /nowhere 404": anonymous.get("/nowhere"),
            "DELETE /runs 405": alice.delete("/runs"),
            "GET /events 400": rita.get("/events", headers={"Last-Event-ID": "nope"}),
        }
        with rita.stream("GET", "/events") as stream:
            assert_secured(dict(stream.headers), "GET /events")
    for what, response in answers.items():
        assert_secured(dict(response.headers), what)
    assert answers["GET /analyst"].headers["content-type"].startswith("text/html")
    # the 413 is checked on a raw socket below (a client may see the close before the answer)


def test_an_unexpected_failure_is_a_500_with_the_error_body_and_the_headers(
    live: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = live.app.state.service

    def broken(**_: object) -> list:
        raise RuntimeError("the disk is on fire at /var/secret/state.sqlite")

    monkeypatch.setattr(service.state, "runs", broken)
    with live.client(
        "alice",
    ) as alice:
        response = alice.get("/runs")
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "server_error"
    assert "secret" not in response.text  # internals stay in the log
    assert_secured(dict(response.headers), "500")


# -- the token and role come first ----------------------------------------------------------------

BODIES: list[tuple[str, bytes]] = [
    ("application/json", b""),
    ("application/json", b"{not json"),
    ("application/json", b'{"question": 7, "extra": [1, 2]}'),
    ("application/json", json.dumps({"question": "ok"}).encode()),
    ("application/json", json.dumps({"decisions": {"call_x": "approve"}}).encode()),
    ("text/plain", b"\x00\xff garbage"),
    ("application/json", b"[" * 50_000),
]


@pytest.mark.parametrize("content_type,body", BODIES)
def test_no_token_or_the_wrong_role_is_refused_whatever_the_body(
    live: Running, content_type: str, body: bytes
) -> None:
    headers = {"Content-Type": content_type}
    with live.client() as anonymous, live.client("rita") as rita, live.client("alice") as alice:
        for path in ("/runs", "/approvals/batch_x/decision"):
            refused = anonymous.post(path, content=body, headers=headers)
            assert refused.status_code == 401, (path, refused.text)
            assert refused.json()["error"]["code"] == "unauthenticated"
        wrong_role = rita.post("/runs", content=body, headers=headers)
        assert wrong_role.status_code == 403 and wrong_role.json()["error"]["code"] == "forbidden"
        wrong_role = alice.post("/approvals/batch_x/decision", content=body, headers=headers)
        assert wrong_role.status_code == 403, wrong_role.text


def test_the_token_is_checked_before_the_body_is_read(live: Running) -> None:
    """Headers announcing a body that never comes: the 401/403 arrives anyway."""
    for token, status in ((None, 401), ("tok-rita", 403)):
        with _connect(live.base_url) as sock:
            headers = {"Content-Type": "application/json", "Content-Length": "5000"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            sock.sendall(_head("POST", "/runs", headers) + b'{"question": ')
            got, _, body = _read_response(sock)
        assert got == status, body


# -- body size ------------------------------------------------------------------------------------


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(live: Running) -> None:
    with _connect(live.base_url) as sock:
        headers = {
            "Authorization": "Bearer tok-alice",
            "Content-Type": "application/json",
            "Content-Length": str(200 * 1024 * 1024),
        }
        sock.sendall(_head("POST", "/runs", headers))  # not one byte of the body
        status, response_headers, body = _read_response(sock)
    assert status == 413
    assert response_headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert_secured(response_headers, "413")


def test_a_streamed_body_is_counted_and_cut_at_the_limit(live: Running) -> None:
    def chunks(total: int) -> Iterator[bytes]:
        sent = 0
        while sent < total:
            piece = b" " * min(64 * 1024, total - sent)
            sent += len(piece)
            yield piece

    with live.client("alice") as alice:
        # no Content-Length: chunked transfer, counted as it arrives
        over = alice.post(
            "/runs", content=chunks(1_048_577), headers={"Content-Type": "application/json"}
        )
        assert over.status_code == 413 and over.json()["error"]["code"] == "payload_too_large"
        # exactly at the limit passes the wall (and is then judged as JSON)
        at = alice.post(
            "/runs", content=chunks(1_048_576), headers={"Content-Type": "application/json"}
        )
        assert at.status_code == 422 and at.json()["error"]["code"] == "invalid_request"


@pytest.fixture
def small_limit(
    demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer
) -> Iterator[Running]:
    app = create_app(make_config(demo_db, state_url, scripted_model, max_body_bytes=64))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)


def test_the_limit_is_configurable(small_limit: Running) -> None:
    with small_limit.client("alice") as alice:
        assert alice.post("/runs", json={"question": "x" * 100}).status_code == 413
        assert alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).status_code == 202


def test_the_limit_comes_from_the_environment(tmp_path: Path) -> None:
    from orchestrator.core.errors import ConfigurationError
    from orchestrator.interfaces.server import ServerConfig

    env = {
        "SQLGATE_DB": f"sqlite:///{tmp_path / 'x.sqlite'}",
        "SQLGATE_TOKENS": json.dumps(TOKENS),
        "OPENAI_API_KEY": "k",
        "SQLGATE_STATE_URL": f"sqlite:///{tmp_path / 's.sqlite'}",
    }
    assert ServerConfig.from_env(environ=env).max_body_bytes == 1_048_576
    assert (
        ServerConfig.from_env(environ={**env, "SQLGATE_MAX_BODY_BYTES": "2048"}).max_body_bytes
        == 2048
    )
    for bad in ("lots", "0"):
        with pytest.raises(ConfigurationError):
            ServerConfig.from_env(environ={**env, "SQLGATE_MAX_BODY_BYTES": bad})


# -- /health --------------------------------------------------------------------------------------


def test_health_tells_nothing_of_the_deployment(live: Running) -> None:
    with live.client() as anonymous, live.client("root") as root:
        assert anonymous.get("/health").json() == {"status": "ok"}
        assert anonymous.get("/health", headers={"Authorization": "Bearer nope"}).json() == {
            "status": "ok"
        }
        with_token = root.get("/health")
    assert with_token.json() == {"status": "ok", "dialect": "sqlite"}
    assert "sqlite:" not in with_token.text and ".sqlite" not in with_token.text


# -- events ---------------------------------------------------------------------------------------


def test_a_last_event_id_from_the_future_is_answered_with_a_resync(live: Running) -> None:
    with live.client("rita") as rita, live.client("alice") as alice:
        events = read_events(rita, lambda got: len(got) >= 1, last_event_id="999999-999999")
        resync = events[0]
        assert resync.event == "resync" and resync.data["type"] == "resync"
        head = Cursor.parse(resync.id or "")
        assert resync.data["id"] == resync.id and head < Cursor(999999, 999999)
        assert "ahead" in resync.data["reason"]
        # after the resync the stream goes on from the server's head
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        later = read_events(
            rita,
            lambda got: any(e.data.get("run_id") == run_id for e in got),
            last_event_id=resync.id,
        )
    assert [e.event for e in later if e.event == "resync"] == []
    assert all(Cursor.parse(e.id or "") > head for e in later)


def test_a_past_or_current_last_event_id_gets_no_resync(live: Running) -> None:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": sc.PRODUCT_COUNT}).json()["run_id"]
        events = read_events(
            rita, lambda got: any(e.data.get("run_id") == run_id for e in got), last_event_id="0-0"
        )
    assert "resync" not in [e.event for e in events]


# -- tokens ---------------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_a_token_stops_working_when_it_expires() -> None:
    clock = Clock(datetime(2026, 11, 23, 12, 0, tzinfo=UTC))
    registry = TokenRegistry.from_json(
        json.dumps(
            [
                {
                    "token": "t-a",
                    "actor": "alice",
                    "role": "analyst",
                    "expires": "2026-11-23T13:00:00Z",
                },
                {"token": "t-r", "actor": "rita", "role": "reviewer"},
            ]
        ),
        clock=clock,
    )
    assert registry.authenticate("Bearer t-a").actor == "alice"
    clock.now += timedelta(hours=1)
    with pytest.raises(TokenExpired) as caught:
        registry.authenticate("Bearer t-a")
    assert caught.value.code == "token_expired" and caught.value.status == 401
    assert registry.authenticate("Bearer t-r").actor == "rita"  # no expiry: never expires


@pytest.mark.parametrize("expires", ["soon", "2026-11-23T13:00:00", 12])
def test_a_malformed_expiry_is_refused(expires: object) -> None:
    with pytest.raises(TokenConfigError):
        TokenRegistry.from_entries(
            [{"token": "t", "actor": "a", "role": "admin", "expires": expires}]
        )


def test_every_known_token_is_compared_whichever_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = TokenRegistry.from_json(
        json.dumps([{"token": f"t{i}", "actor": f"a{i}", "role": "analyst"} for i in range(5)])
    )
    calls: list[str] = []
    compare = hmac.compare_digest

    def counting(a: str, b: str) -> bool:
        calls.append(a)
        return compare(a, b)

    monkeypatch.setattr("orchestrator.interfaces.server.auth.hmac.compare_digest", counting)
    for presented in ("t0", "t4", "unknown"):
        calls.clear()
        try:
            registry.authenticate(f"Bearer {presented}")
        except Exception:
            pass
        assert len(calls) == 5, presented


@pytest.fixture
def expired(demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer) -> Iterator[Running]:
    tokens = TokenRegistry.from_json(
        json.dumps(
            [
                {
                    "token": "tok-old",
                    "actor": "olga",
                    "role": "admin",
                    "expires": "2020-01-01T00:00:00Z",
                }
            ]
        )
    )
    app = create_app(make_config(demo_db, state_url, scripted_model, tokens=tokens))
    server, thread, base_url = start_server(app)
    try:
        yield Running(base_url, app, state_url)
    finally:
        stop_server(server, thread)


def test_an_expired_token_is_a_401_token_expired(expired: Running) -> None:
    with expired.client() as client:
        response = client.get("/me", headers={"Authorization": "Bearer tok-old"})
    assert response.status_code == 401 and response.json()["error"]["code"] == "token_expired"
    assert response.headers["www-authenticate"] == "Bearer"
