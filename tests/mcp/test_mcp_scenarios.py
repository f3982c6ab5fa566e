"""One scenario suite, four clients: the Python SDK and the official TypeScript SDK, each over
stdio and streamable HTTP. What an agent meets with any MCP client: the tools, every error code
with its reason (structured content that validates against the tool's declared output schema),
ask back within seconds at the gate, a person deciding (``sqlgate approvals decide`` beside the
stdio server, the reviewer HTTP API of ``sqlgate serve`` beside the HTTP one), the rows paged to
the end, a clarifying question answered, a waiting run cancelled, the agent's own SQL rejected,
the rate limit.

The TypeScript client is ``tests/mcp/ts-client`` (the SDK pinned in its package.json and
package-lock.json, installed with ``npm ci`` on first use); without node and npm its cases skip.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jsonschema
import pytest

from orchestrator.core.pipeline import PipelineConfig
from orchestrator.features.demo import AMBIGUOUS, TOP_CATEGORIES
from orchestrator.interfaces.server.app import create_app
from orchestrator.interfaces.server.auth import TokenRegistry
from orchestrator.interfaces.server.config import ServerConfig
from ratelimit import SlidingWindowLimiter
from tests.conftest import reviewer_env
from tests.mcp.conftest import sqlgate, sqlgate_env
from tests.mcp.drivers import (
    Driver,
    node_http,
    node_ready,
    node_stdio,
    python_http,
    python_stdio,
)
from tests.mcp.model_server import CassetteModelServer
from tests.mcp.test_mcp_http import mcp_config, serving, serving_app
from tests.mcp.test_mcp_stdio import TOOLS
from tests.scripted_llm.scenarios import AMBIGUOUS_ANSWERS, COUNT_QUESTIONS

#: Model requests per minute: the scenario uses 6; the last question (worst case 5) is refused.
RATE_LIMIT = 10
ASK_AT_GATE_S = 5.0


class Scenario:
    """Calls through one driver, each result checked against the tool's output schema."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.schemas: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def tools(self) -> list[dict[str, Any]]:
        tools = await self.driver.list_tools()
        self.schemas = {t["name"]: t["outputSchema"] for t in tools}
        return tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.driver.call(tool, arguments)
        self.calls.append((tool, result))
        if "structuredContent" in result and tool in self.schemas:
            jsonschema.validate(result["structuredContent"], self.schemas[tool])
        return result

    async def error(self, tool: str, arguments: dict[str, Any], code: str) -> dict[str, Any]:
        """The tool error of this call, which must carry ``code`` and a message."""
        result = await self.call(tool, arguments)
        assert result["isError"], (tool, result)
        error = result["structuredContent"]["error"]
        assert error["code"] == code, (tool, error)
        assert len(error["message"]) > 10, error
        assert code in result["content"][0]["text"]  # the text says it too
        return dict(error)

    async def answer(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.call(tool, arguments)
        assert not result["isError"], (tool, result)
        return dict(result["structuredContent"])


async def scenario(
    driver: Driver,
    decide: Callable[[str, dict[str, Any]], Any],
    reviewer: Driver | None = None,
) -> None:
    """The suite. ``decide(batch_id, decisions)`` is a person's decision (CLI or reviewer HTTP
    API); ``reviewer`` a second connection with a reviewer's token (HTTP only)."""
    s = Scenario(driver)

    # -- the tools: closed inputs, outputs that declare the error shape ------------------------
    tools = {t["name"]: t for t in await s.tools()}
    assert set(tools) == TOOLS  # no approve tool, ever
    for tool in tools.values():
        assert tool["inputSchema"]["additionalProperties"] is False
        options = tool["outputSchema"]["anyOf"]
        assert tool["outputSchema"]["type"] == "object" and len(options) == 2
    question_schema = tools["ask"]["inputSchema"]["properties"]["question"]
    assert {"type": "string", "maxLength": 2000} in question_schema["anyOf"]

    # -- refusals before any run -----------------------------------------------------------
    too_long = await s.error("ask", {"question": "x" * 2001}, "invalid_input")
    assert "2000" in too_long["message"]
    assert (await s.answer("list_runs", {}))["runs"] == []  # no run was created
    refused = await s.error("ask", {"question": "Top?", "approved": True}, "argument_refused")
    assert refused["arguments"] == ["approved"]
    unknown = await s.error("schema", {"verbose": True}, "unknown_argument")
    assert unknown["arguments"] == ["verbose"]
    invalid = await s.error("wait_for_run", {"run_id": "r", "timeout_s": 600}, "invalid_arguments")
    assert [e["field"] for e in invalid["errors"]] == ["timeout_s"]
    await s.error("approve", {"run_id": "r"}, "unknown_tool")
    missing = await s.error("run_status", {"run_id": "run_nope"}, "run_not_found")
    assert "run_nope" in missing["message"]
    unsafe = await s.error("validate", {"sql": "DELETE FROM orders"}, "unsafe")
    assert unsafe["reason_code"] == "not_a_query" and "DELETE" in unsafe["reason"]
    no_table = await driver.read_resource("sqlgate://schema/no_such_table")
    assert "no table 'no_such_table'" in no_table["error"]["message"]

    # -- ask: back at the gate within seconds; a person decides; the answer; every row --------
    asked = await s.call("ask", {"question": TOP_CATEGORIES})
    assert asked["elapsed_s"] < ASK_AT_GATE_S, asked["elapsed_s"]
    paused = asked["structuredContent"]
    assert paused["status"] == "awaiting_approval", paused
    [waiting] = paused["waiting"]
    [question] = paused["questions"]
    assert "sqlgate resume" not in question["error"]["message"]  # the server resumes by itself
    assert "wait_for_run" in question["error"]["message"]
    last = asked["progress"][-1]["message"]
    assert last.startswith(("waiting for approval", "awaiting_approval")), asked["progress"]
    run_id = paused["run_id"]
    early = await s.error("wait_for_run", {"run_id": run_id, "timeout_s": 0}, "awaiting_approval")
    assert early["review"]["batch_id"] == paused["review"]["batch_id"]
    await anyio.to_thread.run_sync(
        decide, paused["review"]["batch_id"], {waiting["call_id"]: "approve"}
    )
    report = await s.answer("wait_for_run", {"run_id": run_id, "timeout_s": 25})
    assert report["status"] == "finished"
    [result] = report["questions"]
    assert result["status"] == "answered" and result["sql"] == waiting["sql"]
    assert result["approvals"][0]["decided_by"] == "rita"
    rows: list[list[Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = await s.answer(
            "get_rows", {"run_id": run_id, "question_id": "q1", "offset": offset, "limit": 2}
        )
        assert page["offset"] == offset and len(page["rows"]) <= 2
        rows += page["rows"]
        offset = page["next_offset"]
    assert len(rows) == result["row_count"] == page["row_count"] > 2
    assert rows[: len(result["rows"])] == result["rows"]
    await s.error("get_rows", {"run_id": run_id, "question_id": "q9"}, "no_rows")
    ended = await s.error("cancel_run", {"run_id": run_id}, "not_cancellable")
    assert ended["status"] == "finished"

    # -- a question asked back, answered; the follow-up cancelled while it waits ------------
    asked_back = await s.error("ask", {"question": AMBIGUOUS}, "needs_clarification")
    ids = {q["id"] for q in asked_back["clarification_questions"]}
    assert ids == set(AMBIGUOUS_ANSWERS)
    ambiguous_run = asked_back["run"]["run_id"]
    follow_up = await s.answer(
        "answer_clarification", {"run_id": ambiguous_run, "answers": AMBIGUOUS_ANSWERS}
    )
    assert follow_up["status"] == "awaiting_approval" and follow_up["run_id"] != ambiguous_run
    cancelled = await s.answer("cancel_run", {"run_id": follow_up["run_id"]})
    assert [q["status"] for q in cancelled["questions"]] == ["cancelled"]
    after = await s.error("run_status", {"run_id": follow_up["run_id"]}, "cancelled")
    assert "nothing ran" in after["reason"]

    runs = (await s.answer("list_runs", {}))["runs"]
    assert [r["run_id"] for r in runs] == [follow_up["run_id"], ambiguous_run, run_id]
    assert runs[2]["status"] == "finished"
    [only] = (await s.answer("list_runs", {"limit": 1, "offset": 1}))["runs"]
    assert only["run_id"] == ambiguous_run
    ended = (await s.answer("list_runs", {"status": "finished"}))["runs"]
    assert len(ended) == 3 and {r["status"] for r in ended} == {"finished"}
    assert (await s.answer("list_runs", {"status": "awaiting_approval"}))["runs"] == []
    await s.error("list_runs", {"status": "done"}, "invalid_arguments")

    # -- the agent's own SQL: the same gate, no model call; a person rejects it ---------------
    sql = "SELECT status, COUNT(*) AS n FROM orders GROUP BY status"
    submitted = await s.answer("submit_sql", {"sql": sql, "purpose": "orders per status"})
    assert submitted["status"] == "awaiting_approval"
    [own] = submitted["waiting"]
    assert own["question"].endswith("purpose: orders per status")
    await anyio.to_thread.run_sync(
        decide,
        submitted["review"]["batch_id"],
        {own["call_id"]: {"action": "reject", "reason": "use the monthly report"}},
    )
    rejected = await s.error(
        "wait_for_run", {"run_id": submitted["run_id"], "timeout_s": 25}, "rejected"
    )
    assert rejected["reason"].endswith("use the monthly report")

    if reviewer is not None:  # a reviewer's token decides, it never asks
        forbidden = await Scenario(reviewer).error("ask", {"question": "Top?"}, "forbidden")
        assert "reviewer" in forbidden["message"]

    # -- the model budget used up: refused at once, with a time to come back ------------------
    limited = await s.error("ask", {"question": COUNT_QUESTIONS[0]}, "rate_limited")
    assert 0 < limited["retry_after"] <= 60

    # every call answered well inside the client's patience, and every error was a tool error
    assert max(r["elapsed_s"] for _, r in s.calls) < 30


def decide_by_cli(env: dict[str, str], tmp_path: Path) -> Callable[[str, dict[str, Any]], Any]:
    def decide(batch_id: str, decisions: dict[str, Any]) -> None:
        file = tmp_path / f"{batch_id}.json"
        file.write_text(json.dumps(decisions))
        done = sqlgate(
            ["approvals", "decide", batch_id, "--file", str(file)],
            {**env, **reviewer_env("rita")},  # a reviewer proven by a token
        )
        assert done.returncode == 0, done.stderr

    return decide


@pytest.fixture(params=["python", "typescript"])
def client_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "typescript":
        why = node_ready()
        if why:
            pytest.skip(why)
    return str(request.param)


def test_stdio_scenario(
    client_kind: str,
    demo_db: Path,
    state_url: str,
    tmp_path: Path,
    model: CassetteModelServer,
) -> None:
    env = sqlgate_env(
        demo_db,
        state_url,
        model.base_url,
        tmp_path,
        SQLGATE_MCP_ACTOR="alice",
        SQLGATE_RATE_LIMIT=f"{RATE_LIMIT}/60",
    )
    stderr = tmp_path / "server-stderr.txt"
    connect = python_stdio if client_kind == "python" else node_stdio

    async def run() -> None:
        async with connect(env, stderr) as driver:
            await scenario(driver, decide_by_cli(env, tmp_path))

    anyio.run(run)
    assert "Traceback" not in stderr.read_text()


def test_http_scenario(
    client_kind: str,
    demo_db: Path,
    state_url: str,
    tmp_path: Path,
    model: CassetteModelServer,
    allow_local_model: None,
) -> None:
    config = mcp_config(
        demo_db,
        state_url,
        model,
        limiter=SlidingWindowLimiter(limit=RATE_LIMIT, window=60.0, mode="fail_fast"),
        pipeline=PipelineConfig(admission=True),
    )
    # The reviewer HTTP API of `sqlgate serve` on the same state database, the same model and
    # limiter (whichever process resumes the run after the decision).
    api = create_app(
        ServerConfig(
            database_url=config.database_url,
            state_url=state_url,
            tokens=config.tokens or TokenRegistry.from_json("[]"),
            llm=config.llm,
            limiter=config.limiter,
            pipeline=config.pipeline,
            poll_interval=0.05,
            sweep_interval=0.2,
        )
    )
    connect: Callable[[str, str], AbstractAsyncContextManager[Driver]] = (
        python_http if client_kind == "python" else node_http
    )

    async def run(url: str, api_url: str) -> None:
        def decide(batch_id: str, decisions: dict[str, Any]) -> None:
            response = httpx2.post(
                f"{api_url}/approvals/{batch_id}/decision",
                json={"decisions": decisions},
                headers={"Authorization": "Bearer tok-rita"},
                timeout=30,
            )
            assert response.status_code == 200, response.text
            assert response.json()["decided_by"] == "rita"

        async with connect(url, "tok-alice") as driver, connect(url, "tok-rita") as rita:
            await scenario(driver, decide, reviewer=rita)

    with serving(config) as url, serving_app(api) as api_url:
        anyio.run(run, url, api_url)
