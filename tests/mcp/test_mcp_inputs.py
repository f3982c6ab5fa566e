"""Inputs ``ask`` refuses before any run starts (the SDK's client, connected in-process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from orchestrator.core.llm import LLMSettings
from orchestrator.core.replay import CassetteTransport
from orchestrator.interfaces.mcp import McpConfig, build_server


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"question": "How many orders?", "questions": ["And customers?"]},
        {"questions": []},
        {"question": "  "},
    ],
    ids=["neither", "both", "empty-list", "blank"],
)
def test_ask_needs_exactly_one_question_or_list(
    demo_db: Path, tmp_path: Path, arguments: dict[str, Any]
) -> None:
    server = build_server(
        McpConfig(
            database_url=f"sqlite:///{demo_db}",
            state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
            llm=LLMSettings(base_url="http://127.0.0.1:9/v1"),
            actor="alice",
            http_client=httpx2.Client(transport=CassetteTransport([])),  # no model reply at all
        )
    )

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("ask", arguments)

    refused = anyio.run(call)

    assert refused.is_error
    assert refused.structured_content["error"]["code"] == "invalid_input"
    assert server.service.state.runs() == []  # nothing started


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_runs", {"offset": 2**63}),
        ("get_rows", {"run_id": "run_x", "question_id": "q1", "offset": 2**63}),
        ("get_rows", {"run_id": "run_x", "question_id": "q1", "offset": 2**64 + 5}),
    ],
)
def test_an_offset_past_any_page_is_a_typed_refusal(
    demo_db: Path, tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    server = build_server(
        McpConfig(
            database_url=f"sqlite:///{demo_db}",
            state_url=f"sqlite:///{tmp_path / 'state.sqlite'}",
            llm=LLMSettings(base_url="http://127.0.0.1:9/v1"),
            actor="alice",
            http_client=httpx2.Client(transport=CassetteTransport([])),
        )
    )

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool(tool, arguments)

    refused = anyio.run(call)

    assert refused.is_error
    error = refused.structured_content["error"]
    assert error["code"] == "invalid_arguments" and error["errors"][0]["field"] == "offset"
