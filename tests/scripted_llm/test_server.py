"""The scripted server, driven through the real openai client over a real socket."""

from __future__ import annotations

import json
import sys

import httpx2
import openai
import pytest

# Relative, so this module imports however pytest names the package (scripted_llm or tests.scripted_llm).
from .server import (
    SCRIPTED_HEADER,
    SCRIPTED_HEADER_VALUE,
    ScriptedLLMServer,
    ScriptedQueue,
    ScriptedReply,
)

MESSAGES = [{"role": "user", "content": "How many customers are there?"}]


def client_for(server: ScriptedLLMServer, **kwargs: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test-key", max_retries=0, **kwargs)


def ask(client: openai.OpenAI, model: str = "gpt-test"):
    return client.chat.completions.create(model=model, messages=MESSAGES)


def test_exports_are_sorted_and_complete():
    scripted_llm = sys.modules[__package__]
    assert scripted_llm.__all__ == sorted(scripted_llm.__all__)
    for name in scripted_llm.__all__:
        assert hasattr(scripted_llm, name)


def test_normal_reply_looks_like_openai():
    queue = ScriptedQueue([ScriptedReply('{"sql": "SELECT 1"}')])
    with ScriptedLLMServer(queue) as server:
        client = client_for(server)
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-test", messages=MESSAGES, temperature=0
        )
        completion = raw.parse()

    assert raw.headers[SCRIPTED_HEADER] == SCRIPTED_HEADER_VALUE
    assert completion.object == "chat.completion"
    assert completion.id == "chatcmpl-scripted-1"
    assert completion.created == 1767225600
    assert completion.model == "gpt-test"
    assert completion.system_fingerprint == "sqlgate-scripted"
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == '{"sql": "SELECT 1"}'
    assert choice.finish_reason == "stop"
    usage = completion.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert server.requests == [{"model": "gpt-test", "messages": MESSAGES, "temperature": 0}]
    assert queue.remaining == 0
    server.assert_no_errors()


def test_explicit_token_counts_and_callable_responder():
    def echo(request_json: dict) -> ScriptedReply:
        return ScriptedReply(
            request_json["messages"][-1]["content"].upper(), prompt_tokens=7, completion_tokens=3
        )

    with ScriptedLLMServer(echo) as server:
        completion = ask(client_for(server))

    assert completion.choices[0].message.content == "HOW MANY CUSTOMERS ARE THERE?"
    assert (
        completion.usage.prompt_tokens,
        completion.usage.completion_tokens,
        completion.usage.total_tokens,
    ) == (7, 3, 10)


def test_rate_limited_reply_carries_retry_after_headers():
    with ScriptedLLMServer(ScriptedQueue([ScriptedReply.rate_limited(2.5)])) as server:
        with pytest.raises(openai.RateLimitError) as caught:
            ask(client_for(server))

    response = caught.value.response
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2.5"
    assert response.headers["retry-after-ms"] == "2500"
    assert response.headers[SCRIPTED_HEADER] == SCRIPTED_HEADER_VALUE
    error = response.json()["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert "2.5s" in error["message"]


def test_server_error_reply():
    with ScriptedLLMServer(ScriptedQueue([ScriptedReply.server_error()])) as server:
        with pytest.raises(openai.InternalServerError) as caught:
            ask(client_for(server))
    assert caught.value.status_code == 500
    assert caught.value.response.json()["error"]["type"] == "server_error"
    server.assert_no_errors()


def test_bad_request_reply_for_unsupported_response_format():
    reply = ScriptedReply.bad_request(
        "response_format json_schema is not supported", param="response_format"
    )
    with ScriptedLLMServer(ScriptedQueue([reply])) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            client_for(server).chat.completions.create(
                model="gpt-test",
                messages=MESSAGES,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "object"}},
                },
            )
    assert caught.value.status_code == 400
    assert "json_schema is not supported" in caught.value.message
    assert server.requests[0]["response_format"]["type"] == "json_schema"


def test_invalid_json_reply_is_a_200_with_unparseable_content():
    with ScriptedLLMServer(
        ScriptedQueue([ScriptedReply.invalid_json('{"sql": "SELECT')])
    ) as server:
        completion = ask(client_for(server))
    content = completion.choices[0].message.content
    assert content == '{"sql": "SELECT'
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)


def test_slow_reply_times_out_on_a_short_client_timeout():
    queue = ScriptedQueue(
        [ScriptedReply.slow("late", delay_s=1.0), ScriptedReply.slow("in time", delay_s=0.05)]
    )
    with ScriptedLLMServer(queue) as server:
        with pytest.raises(openai.APITimeoutError):
            ask(client_for(server, timeout=0.2))
        assert ask(client_for(server, timeout=10.0)).choices[0].message.content == "in time"


def test_delay_goes_through_the_injected_sleep():
    waits: list[float] = []
    with ScriptedLLMServer(
        ScriptedQueue([ScriptedReply.slow("ok", delay_s=30.0)]), sleep=waits.append
    ) as server:
        assert ask(client_for(server)).choices[0].message.content == "ok"
    assert waits == [30.0]


def test_exhausted_queue_fails_loudly_and_records_the_error():
    queue = ScriptedQueue([ScriptedReply("only one")])
    with ScriptedLLMServer(queue) as server:
        client = client_for(server)
        assert ask(client).choices[0].message.content == "only one"
        with pytest.raises(openai.InternalServerError) as caught:
            ask(client)

    assert "scripted queue exhausted" in caught.value.message
    assert len(queue.errors) == 1 and "1 scripted replies were served" in queue.errors[0]
    assert len(server.errors) == 1
    with pytest.raises(AssertionError, match="scripted queue exhausted"):
        server.assert_no_errors()
    assert len(server.requests) == 2


def test_models_endpoint_lists_the_configured_models():
    with ScriptedLLMServer(ScriptedQueue([]), models=("model-a", "model-b")) as server:
        models = client_for(server).models.list()
    assert [m.id for m in models.data] == ["model-a", "model-b"]
    assert {m.owned_by for m in models.data} == {"sqlgate-scripted"}


def test_unknown_route_and_malformed_body_get_json_errors():
    with ScriptedLLMServer(ScriptedQueue([])) as server, httpx2.Client() as http:
        missing = http.post(server.base_url + "/embeddings", json={})
        malformed = http.post(server.base_url + "/chat/completions", content=b"not json")
    assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]
    assert (
        malformed.status_code == 400 and "could not parse" in malformed.json()["error"]["message"]
    )
    assert missing.headers[SCRIPTED_HEADER] == SCRIPTED_HEADER_VALUE
    assert server.requests == []


def test_stop_is_clean_idempotent_and_closes_kept_alive_connections():
    server = ScriptedLLMServer(ScriptedQueue([ScriptedReply("one"), ScriptedReply("two")]))
    base_url = server.start()
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    assert server.start() == base_url
    client = client_for(server)
    assert ask(client).choices[0].message.content == "one"  # leaves a pooled keep-alive connection
    server.stop()
    server.stop()
    with pytest.raises(openai.APIConnectionError):
        ask(client)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    assert len(server.requests) == 1


def test_gzip_responses_are_compressed_on_the_wire_and_decoded_by_the_client():
    with ScriptedLLMServer(ScriptedQueue([ScriptedReply("zipped")]), gzip_responses=True) as server:
        raw = client_for(server).chat.completions.with_raw_response.create(
            model="gpt-test", messages=MESSAGES
        )
    assert raw.headers["content-encoding"] == "gzip"
    assert raw.parse().choices[0].message.content == "zipped"
