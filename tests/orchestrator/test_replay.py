"""CassetteTransport replays what VCR.py recorded from a real HTTP server, with that server gone."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import httpx2
import openai
import pytest
import vcr
import yaml

import orchestrator.core.errors as errors
from orchestrator.core import replay
from orchestrator.core.replay import CassetteTransport, ReplayError, ReplayMiss, load_cassette
from tests.scripted_llm import (
    SCRIPTED_HEADER,
    SCRIPTED_HEADER_VALUE,
    ScriptedLLMServer,
    ScriptedQueue,
    ScriptedReply,
)

REPLAY_URL = "http://replay.invalid/v1"  # a host that cannot resolve: replay must not need it


def question(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": text}]


def recording_vcr() -> vcr.VCR:
    return vcr.VCR(
        record_mode="all",
        match_on=["method", "path", "body"],
        filter_headers=["authorization", "api-key", "x-api-key"],
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Record four interactions against the scripted server, then stop it for good."""
    cassette = tmp_path_factory.mktemp("cassettes") / "recorded.yaml"
    queue = ScriptedQueue(
        [
            ScriptedReply('{"answer": "first"}'),
            ScriptedReply('{"answer": "second"}'),
            ScriptedReply('{"answer": "again, first recording"}'),
            ScriptedReply.rate_limited(1.5),
        ]
    )
    with ScriptedLLMServer(queue) as server, recording_vcr().use_cassette(str(cassette)):
        base_url = server.base_url
        client = openai.OpenAI(base_url=base_url, api_key="sk-test-secret-key", max_retries=0)
        client.chat.completions.create(
            model="gpt-test", messages=question("How many customers?"), temperature=0
        )
        client.chat.completions.create(
            model="gpt-test", messages=question("Top products?"), temperature=0
        )
        client.chat.completions.create(
            model="gpt-test", messages=question("How many customers?"), temperature=0
        )
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(
                model="gpt-test", messages=question("Busy?"), temperature=0
            )
    server.assert_no_errors()
    with pytest.raises(openai.APIConnectionError):  # the server is really gone
        openai.OpenAI(base_url=base_url, api_key="k", max_retries=0).models.list()
    return cassette


def replay_client(transport: httpx2.BaseTransport) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=REPLAY_URL,
        api_key="replay-key",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )


def ask(client: openai.OpenAI, text: str):
    return client.chat.completions.create(model="gpt-test", messages=question(text), temperature=0)


def test_exports_are_sorted_and_errors_sit_in_the_orchestrator_tree():
    assert replay.__all__ == sorted(replay.__all__)
    assert issubclass(ReplayMiss, ReplayError) and issubclass(ReplayError, errors.LLMError)
    assert ReplayMiss is errors.ReplayMiss and ReplayError is errors.ReplayError
    assert (ReplayError.code, ReplayMiss.code) == ("replay_error", "replay_miss")


def test_recorded_cassette_holds_no_credentials(recorded: Path):
    text = recorded.read_text()
    assert "sk-test-secret-key" not in text
    for interaction in yaml.safe_load(text)["interactions"]:
        names = {name.lower() for name in interaction["request"]["headers"]}
        assert not names & {"authorization", "api-key", "x-api-key"}
    assert SCRIPTED_HEADER in text  # the cassette says where its replies came from


def test_replay_serves_recorded_replies_with_the_server_stopped(recorded: Path):
    transport = CassetteTransport([recorded])
    client = replay_client(transport)

    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=question("How many customers?"), temperature=0
    )
    assert raw.headers[SCRIPTED_HEADER] == SCRIPTED_HEADER_VALUE
    first = raw.parse()
    assert first.choices[0].message.content == '{"answer": "first"}'
    assert first.system_fingerprint == "sqlgate-scripted"
    assert ask(client, "Top products?").choices[0].message.content == '{"answer": "second"}'
    # The same body recorded twice plays in recorded order.
    assert (
        ask(client, "How many customers?").choices[0].message.content
        == '{"answer": "again, first recording"}'
    )
    with pytest.raises(openai.RateLimitError) as caught:
        ask(client, "Busy?")
    assert caught.value.response.headers["retry-after"] == "1.5"

    assert [i.index for i in transport.played] == [0, 1, 2, 3]
    assert transport.unplayed() == []
    transport.assert_all_played()


def test_an_interaction_is_not_played_twice(recorded: Path):
    transport = CassetteTransport(recorded)
    client = replay_client(transport)
    ask(client, "Top products?")
    with pytest.raises(ReplayMiss, match="already played"):
        ask(client, "Top products?")
    assert [i.index for i in transport.played] == [1]


def test_a_body_difference_is_a_miss_naming_method_path_digest_and_cassette(recorded: Path):
    transport = CassetteTransport(recorded)
    client = replay_client(transport)
    with pytest.raises(ReplayMiss) as caught:  # not wrapped in APIConnectionError by openai 3.54
        ask(client, "How many customers??")
    message = str(caught.value)
    assert "POST /v1/chat/completions" in message
    assert "sha256:" in message
    assert str(recorded) in message
    assert "nearest unplayed: recorded.yaml#0" in message
    assert caught.value.code == "replay_miss"
    assert transport.played == []
    assert len(transport.unplayed()) == 4


def test_json_key_order_does_not_matter_but_content_does(recorded: Path):
    transport = CassetteTransport(recorded)
    body = {"temperature": 0, "messages": question("Top products?"), "model": "gpt-test"}
    with httpx2.Client(transport=transport) as http:
        reply = http.post(
            REPLAY_URL + "/chat/completions", content=json.dumps(body, indent=2).encode()
        )
        assert reply.json()["choices"][0]["message"]["content"] == '{"answer": "second"}'
        with pytest.raises(ReplayMiss):
            http.post(REPLAY_URL + "/chat/completions", json={**body, "temperature": 0.5})


def test_host_and_port_are_ignored_unless_asked_for(recorded: Path):
    with httpx2.Client(
        transport=CassetteTransport(recorded, match_on=("method", "host", "path"))
    ) as http:
        with pytest.raises(ReplayMiss, match="matching on method, host, path"):
            http.post(REPLAY_URL + "/chat/completions", json={})
    with httpx2.Client(transport=CassetteTransport(recorded, match_on=("method", "path"))) as http:
        assert http.post("http://elsewhere:9/v1/chat/completions", json={}).status_code == 200


def test_assert_all_played_names_the_waiting_interactions(recorded: Path):
    transport = CassetteTransport(recorded)
    ask(replay_client(transport), "How many customers?")
    with pytest.raises(
        ReplayError, match=r"3 recorded interaction\(s\) were never played: recorded.yaml#1"
    ):
        transport.assert_all_played()


def test_async_client_replays_too(recorded: Path):
    transport = CassetteTransport(recorded)

    async def run() -> str | None:
        async with httpx2.AsyncClient(transport=transport) as http:
            client = openai.AsyncOpenAI(
                base_url=REPLAY_URL, api_key="k", max_retries=0, http_client=http
            )
            completion = await client.chat.completions.create(
                model="gpt-test", messages=question("Top products?"), temperature=0
            )
            return completion.choices[0].message.content

    assert asyncio.run(run()) == '{"answer": "second"}'


def write_cassette(path: Path, interactions: list[dict]) -> Path:
    path.write_text(yaml.dump({"version": 1, "interactions": interactions}))
    return path


def test_gzip_response_and_binary_request_body(tmp_path: Path):
    reply = {"choices": [{"message": {"content": "zipped"}}]}
    request_body = (
        json.dumps({"b": 1, "a": [1, 2]}).encode() + b"\xff"
    )  # not UTF-8: YAML stores !!binary
    cassette = write_cassette(
        tmp_path / "gzip.yaml",
        [
            {
                "request": {
                    "method": "POST",
                    "uri": "https://api.example/v1/x",
                    "body": request_body,
                    "headers": {},
                },
                "response": {
                    "status": {"code": 200, "message": "OK"},
                    "headers": {"Content-Encoding": ["gzip"], "Content-Type": ["application/json"]},
                    "body": {"string": gzip.compress(json.dumps(reply).encode())},
                },
            }
        ],
    )
    assert "!!binary" in cassette.read_text()
    with httpx2.Client(transport=CassetteTransport(cassette)) as http:
        response = http.post("http://other/v1/x", content=request_body)
    assert response.json() == reply
    assert response.reason_phrase == "OK"


def test_cassette_problems_are_replay_errors(tmp_path: Path):
    with pytest.raises(ReplayError, match="cassette not found") as caught:
        CassetteTransport(tmp_path / "missing.yaml")
    assert caught.value.code == "replay_error"
    not_a_cassette = tmp_path / "list.yaml"
    not_a_cassette.write_text("[]")
    with pytest.raises(ReplayError, match="not a VCR.py cassette"):
        load_cassette(not_a_cassette)
    with pytest.raises(ReplayError, match="interaction 0 is malformed"):
        load_cassette(write_cassette(tmp_path / "broken.yaml", [{"request": {}}]))
    with pytest.raises(ValueError, match="unknown match_on"):
        CassetteTransport([], match_on=("method", "headers"))


@pytest.mark.parametrize("decode_compressed_response", [False, True])
def test_gzip_recordings_replay_whether_or_not_vcr_decoded_them(
    tmp_path: Path, decode_compressed_response: bool
):
    cassette = tmp_path / "gzip.yaml"
    queue = ScriptedQueue([ScriptedReply('{"answer": "compressed"}')])
    recorder = vcr.VCR(
        record_mode="all",
        match_on=["method", "path", "body"],
        filter_headers=["authorization"],
        decode_compressed_response=decode_compressed_response,
    )
    with (
        ScriptedLLMServer(queue, gzip_responses=True) as server,
        recorder.use_cassette(str(cassette)),
    ):
        openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0).chat.completions.create(
            model="gpt-test", messages=question("Zipped?")
        )
    text = cassette.read_text()
    # VCR.py stores the raw (compressed) bytes as !!binary unless asked to decode them.
    assert ("!!binary" in text) is not decode_compressed_response
    assert ("compressed" in text) is decode_compressed_response

    completion = replay_client(CassetteTransport(cassette)).chat.completions.create(
        model="gpt-test", messages=question("Zipped?")
    )
    assert completion.choices[0].message.content == '{"answer": "compressed"}'
