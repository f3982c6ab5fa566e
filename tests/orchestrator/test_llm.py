"""The model seam against the scripted server: fallbacks, retries, limiter accounting, redaction."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import httpx2
import pytest

from agents import SQLGenerator
from orchestrator.core.errors import LLMOutputInvalid, LLMRequestRejected, LLMUnavailable
from orchestrator.core.llm import LLMClient, LLMSettings, redact, retry_after_seconds
from ratelimit import ManualClock, RateLimitExceeded, SlidingWindowLimiter
from tests.scripted_llm.server import ScriptedLLMServer, ScriptedQueue, ScriptedReply

GOOD = json.dumps(
    {"results": [{"question_id": "q1", "sql": "SELECT 1 AS one", "explanation": "constant"}]}
)
MESSAGES = [
    {"role": "system", "content": "x"},
    {"role": "user", "content": "Analyst's question: q"},
]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def _client(server: ScriptedLLMServer, clock: ManualClock, **settings) -> LLMClient:
    limiter = SlidingWindowLimiter(
        limit=settings.pop("limit", 100), window=60.0, clock=clock, sleep=clock.sleep
    )
    return LLMClient(
        LLMSettings(
            model="scripted",
            base_url=server.base_url,
            api_key="sk-abcdefghijklmnopqrstuvwx",
            **settings,
        ),
        limiter=limiter,
        http_client=httpx2.Client(),  # a real local socket: the scripted server
        sleep=clock.sleep,
    )


@pytest.fixture
def serve() -> Iterator:
    servers = []

    def start(*replies: ScriptedReply) -> ScriptedLLMServer:
        server = ScriptedLLMServer(ScriptedQueue(replies))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def test_json_schema_unsupported_falls_back_to_json_mode_for_good(serve, clock) -> None:
    server = serve(
        ScriptedReply.bad_request(
            "response_format json_schema is not supported", param="response_format"
        ),
        ScriptedReply(GOOD),
        ScriptedReply(GOOD),
    )
    llm = _client(server, clock)

    first, call = llm.call(SQLGenerator(), MESSAGES)
    second, _ = llm.call(SQLGenerator(), MESSAGES)

    assert first.results[0].sql == second.results[0].sql == "SELECT 1 AS one"
    formats = [r["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    assert call.http_requests == 2 and llm.limiter.usage().used == 3


def test_transient_errors_exhaust_into_a_clear_error_and_every_attempt_is_counted(
    serve, clock
) -> None:
    server = serve(*[ScriptedReply.server_error() for _ in range(4)])
    llm = _client(server, clock, max_attempts=4)

    with pytest.raises(LLMUnavailable, match="failed 4 times"):
        llm.call(SQLGenerator(), MESSAGES)

    assert len(server.requests) == 4
    assert llm.limiter.usage().used == 4  # every HTTP attempt passed the limiter
    assert len(clock.slept) == 3  # backoff between attempts, on the injected clock


def _closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_refused_connection_is_not_charged_to_the_limiter_and_ends_the_run(clock) -> None:
    limiter = SlidingWindowLimiter(limit=5, window=60.0, clock=clock, sleep=clock.sleep)
    llm = LLMClient(
        LLMSettings(model="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1", max_attempts=4),
        limiter=limiter,
        http_client=httpx2.Client(),
        sleep=clock.sleep,
    )

    with pytest.raises(LLMUnavailable, match="failed 4 times") as caught:
        llm.call(SQLGenerator(), MESSAGES)

    assert caught.value.ends_run  # every later call would fail alike: the run stops
    assert caught.value.http_requests == 0 and llm.http_requests == 0  # nothing was sent
    assert limiter.usage().used == 0  # each attempt's slot was given back
    assert len(clock.slept) == 3


def test_a_server_error_is_charged_even_though_it_ends_the_run(serve, clock) -> None:
    server = serve(ScriptedReply.server_error(), ScriptedReply.server_error())
    llm = _client(server, clock, max_attempts=2)

    with pytest.raises(LLMUnavailable) as caught:
        llm.call(SQLGenerator(), MESSAGES)

    assert caught.value.ends_run and caught.value.http_requests == 2
    assert llm.limiter.usage().used == 2  # the requests reached the server: they count


def test_retry_after_is_honoured_exactly(serve, clock) -> None:
    server = serve(ScriptedReply.rate_limited(7.25), ScriptedReply(GOOD))
    llm = _client(server, clock)

    llm.call(SQLGenerator(), MESSAGES)

    assert 7.25 in clock.slept
    assert len(server.requests) == 2


def test_authentication_error_is_not_retried_and_never_shows_the_key(serve, clock) -> None:
    body = json.dumps(
        {
            "error": {
                "message": "Incorrect API key provided: sk-abcdefghijklmnopqrstuvwx",
                "type": "invalid_request_error",
            }
        }
    )
    server = serve(ScriptedReply(status=401, raw_body=body))
    llm = _client(server, clock)

    with pytest.raises(LLMRequestRejected) as caught:
        llm.call(SQLGenerator(), MESSAGES)

    assert len(server.requests) == 1
    assert "sk-abcdefghij" not in caught.value.message
    assert "HTTP 401" in caught.value.message
    assert caught.value.ends_run  # the key is wrong for every later request too


def test_invalid_json_twice_raises_after_one_repair(serve, clock) -> None:
    server = serve(ScriptedReply.invalid_json(), ScriptedReply.invalid_json("not json"))
    llm = _client(server, clock)

    with pytest.raises(LLMOutputInvalid):
        llm.call(SQLGenerator(), MESSAGES)

    assert len(server.requests) == 2
    repair = server.requests[1]["messages"]
    assert repair[-1]["role"] == "user" and "not valid" in repair[-1]["content"]


def test_limiter_refusal_sends_nothing(serve, clock) -> None:
    server = serve(ScriptedReply(GOOD))
    llm = _client(server, clock, limit=1)
    llm.call(SQLGenerator(), MESSAGES)

    with pytest.raises(RateLimitExceeded) as caught:
        llm.call(SQLGenerator(), MESSAGES)

    assert caught.value.retry_after == pytest.approx(60.0)
    assert len(server.requests) == 1


def test_redact_removes_keys_and_bearer_tokens() -> None:
    assert "sk-" not in redact("key sk-proj-ABCDEF1234567890 was wrong")
    assert "abc.def" not in redact("Authorization: Bearer abc.def.ghi")


def test_retry_after_parsing_prefers_milliseconds() -> None:
    response = httpx2.Response(429, headers={"retry-after": "3", "retry-after-ms": "1500"})
    error = type("E", (Exception,), {})()
    error.response = response
    assert retry_after_seconds(error) == 1.5
