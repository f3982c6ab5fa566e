"""``ask``'s optional ``evidence``: in its input schema, length-capped like a question, recorded
with the run and seen by the plan (the SDK's client, connected in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client

from orchestrator.core.checkpoint import PausedCheckpoint
from orchestrator.core.llm import LLMSettings
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.runs import RunStore
from orchestrator.interfaces.mcp import McpConfig, build_server
from ratelimit import SlidingWindowLimiter
from tests.mcp.conftest import SCRIPTED_MODEL
from tests.mcp.model_server import CassetteModelServer
from tests.scripted_llm.scenarios import PRODUCT_COUNT

EVIDENCE = "products are the rows of the products table"


def _server(demo_db: Path, state_url: str, **llm: Any) -> Any:
    settings = llm or {"base_url": "http://127.0.0.1:9/v1"}
    transport = {} if llm else {"http_client": httpx2.Client(transport=CassetteTransport([]))}
    return build_server(
        McpConfig(
            database_url=f"sqlite:///{demo_db}",
            state_url=state_url,
            llm=LLMSettings(max_attempts=1, **settings),
            actor="alice",
            limiter=SlidingWindowLimiter(limit=1000, window=60.0, mode="wait"),
            poll_interval=0.05,
            sweep_interval=0.2,
            **transport,
        )
    )


def test_evidence_is_in_asks_schema_with_the_question_limit(demo_db: Path, state_url: str) -> None:
    server = _server(demo_db, state_url)

    async def listed() -> Any:
        async with Client(server) as client:
            return await client.list_tools()

    [ask] = [tool for tool in anyio.run(listed).tools if tool.name == "ask"]
    evidence = ask.input_schema["properties"]["evidence"]
    [text] = [option for option in evidence["anyOf"] if option.get("type") == "string"]
    assert text["maxLength"] == server.service.config.pipeline.max_question_chars
    assert "evidence" not in ask.input_schema.get("required", [])
    assert "female refers to gender" in evidence["description"]
    assert "evidence" in (ask.description or "")


def test_evidence_longer_than_a_question_may_be_is_refused(demo_db: Path, state_url: str) -> None:
    server = _server(demo_db, state_url)
    limit = server.service.config.pipeline.max_question_chars

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool(
                "ask", {"question": PRODUCT_COUNT, "evidence": "x" * (limit + 1)}
            )

    refused = anyio.run(call)

    assert refused.is_error
    error = refused.structured_content["error"]
    assert error["code"] == "invalid_input"
    assert f"evidence has {limit + 1} characters; the limit is {limit}" in error["message"]
    assert server.service.state.runs() == []  # nothing started


def test_evidence_is_recorded_with_the_run_and_seen_by_the_plan(
    demo_db: Path, state_url: str, model: CassetteModelServer, allow_local_model: None
) -> None:
    server = _server(demo_db, state_url, model=SCRIPTED_MODEL, base_url=model.base_url)

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("ask", {"question": PRODUCT_COUNT, "evidence": EVIDENCE})

    paused = anyio.run(call)

    assert not paused.is_error, paused.structured_content
    run_id = paused.structured_content["run_id"]
    checkpoint = RunStore(state_url).load(run_id).checkpoint
    assert isinstance(checkpoint, PausedCheckpoint) and checkpoint.questions[0].hint == EVIDENCE
    if model.recording:
        body = model.recorded[0]["request"]["body"]
    else:
        assert model.transport is not None
        body = model.transport.played[0].request_body.decode()
    first = json.loads(body)
    prompt = " ".join(m["content"] for m in first["messages"])
    assert f"Hint from the asker: {EVIDENCE}" in prompt


def test_a_clarifications_follow_up_keeps_the_askers_evidence(
    demo_db: Path, state_url: str, model: CassetteModelServer, allow_local_model: None
) -> None:
    from tests.scripted_llm.scenarios import AMBIGUOUS, AMBIGUOUS_ANSWERS

    server = _server(demo_db, state_url, model=SCRIPTED_MODEL, base_url=model.base_url)
    evidence = "best means the most revenue"

    async def call() -> tuple[Any, Any]:
        async with Client(server) as client:
            asked = await client.call_tool("ask", {"question": AMBIGUOUS, "evidence": evidence})
            run_id = asked.structured_content["error"]["run"]["run_id"]
            follow = await client.call_tool(
                "answer_clarification", {"run_id": run_id, "answers": AMBIGUOUS_ANSWERS}
            )
            return asked, follow

    asked, follow = anyio.run(call)

    assert asked.structured_content["error"]["code"] == "needs_clarification"
    assert not follow.is_error, follow.structured_content
    checkpoint = RunStore(state_url).load(follow.structured_content["run_id"]).checkpoint
    assert isinstance(checkpoint, PausedCheckpoint) and checkpoint.questions[0].hint == evidence
