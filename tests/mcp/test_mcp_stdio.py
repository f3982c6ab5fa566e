"""``sqlgate mcp`` over stdio, driven by the MCP SDK's own client in a subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from orchestrator.features.demo import TOP_CATEGORIES
from tests.conftest import ROOT, reviewer_env
from tests.mcp.conftest import sqlgate, sqlgate_env
from tests.mcp.model_server import CassetteModelServer

TOOLS = {
    "ask",
    "submit_sql",
    "run_status",
    "wait_for_run",
    "list_runs",
    "cancel_run",
    "answer_clarification",
    "get_rows",
    "publish_template",
    "schema",
    "validate",
    "explain_policy",
}
#: The stages a single question goes through up to the gate, in the pipeline's order.
STAGES_TO_GATE = ["queued", "reasoning", "exploring schema", "writing SQL"]


def stages(progress: list[tuple[str, float, str | None]], tool: str) -> list[str]:
    """The stages one call reported, each once, in the order they first came."""
    seen: list[str] = []
    for name, _, message in progress:
        stage = (message or "").split(" (")[0]
        if name == tool and stage not in seen:
            seen.append(stage)
    return seen


def stdio(env: dict[str, str]) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable,
            args=["-m", "orchestrator.cli", "mcp"],
            env=env,
            cwd=ROOT,
        ),
        read_timeout_seconds=120,
    )


def test_tools_resources_and_refusals_over_stdio(
    demo_db: Path, state_url: str, tmp_path: Path
) -> None:
    # No model request is made here: the model URL points at nothing.
    env = sqlgate_env(demo_db, state_url, "http://127.0.0.1:9/v1", tmp_path)

    async def session() -> dict[str, Any]:
        async with stdio(env) as client:
            tools = (await client.list_tools()).tools
            resources = (await client.list_resources()).resources
            catalogue = await client.read_resource("sqlgate://schema")
            approve = await client.call_tool("ask", {"question": "Top products?", "approved": True})
            actor = await client.call_tool("wait_for_run", {"run_id": "run_x", "actor": "rita"})
            unknown = await client.call_tool("schema", {"tables": ["orders"], "verbose": True})
            unsafe = await client.call_tool("validate", {"sql": "DELETE FROM orders"})
            safe = await client.call_tool("validate", {"sql": "SELECT name FROM categories"})
            missing = await client.call_tool("run_status", {"run_id": "run_nope"})
            policy = await client.call_tool("explain_policy", {})
            return locals()

    got = anyio.run(session)

    tools = {t.name: t for t in got["tools"]}
    assert set(tools) == TOOLS  # no approve tool, ever
    for tool in tools.values():
        assert tool.input_schema["additionalProperties"] is False
        assert len(tool.description or "") > 40
        assert tool.output_schema is not None
    assert {str(r.uri) for r in got["resources"]} == {"sqlgate://schema"}
    assert "orders(" in got["catalogue"].contents[0].text

    for refused in (got["approve"], got["actor"]):
        assert refused.is_error
        assert refused.structured_content["error"]["code"] == "argument_refused"
    assert got["unknown"].structured_content["error"]["code"] == "unknown_argument"

    unsafe = got["unsafe"]
    assert unsafe.is_error
    error = unsafe.structured_content["error"]
    assert error["code"] == "unsafe" and error["reason_code"] == "not_a_query"
    assert "DELETE" in error["reason"]
    assert got["safe"].structured_content["sql"] == "SELECT name FROM categories LIMIT 1001"
    assert got["missing"].structured_content["error"]["code"] == "run_not_found"
    assert "reviewer" in got["policy"].structured_content["who_decides"]


def test_ask_pauses_a_reviewer_decides_by_cli_and_wait_returns_the_answer(
    demo_db: Path, state_url: str, tmp_path: Path, model: CassetteModelServer
) -> None:
    env = sqlgate_env(demo_db, state_url, model.base_url, tmp_path, SQLGATE_MCP_ACTOR="alice")
    progress: list[tuple[str, float, str | None]] = []

    async def on(tool: str) -> Any:
        async def record(value: float, total: float | None, message: str | None) -> None:
            progress.append((tool, value, message))

        return record

    async def session() -> dict[str, Any]:
        async with stdio(env) as client:
            asked = await client.call_tool(
                "ask", {"question": TOP_CATEGORIES}, progress_callback=await on("ask")
            )
            paused = asked.structured_content
            decisions = tmp_path / "decisions.json"
            decisions.write_text(json.dumps({w["call_id"]: "approve" for w in paused["waiting"]}))
            early = await client.call_tool(
                "wait_for_run", {"run_id": paused["run_id"], "timeout_s": 0}
            )
            waited: dict[str, Any] = {}

            async def wait() -> None:
                waited["result"] = await client.call_tool(
                    "wait_for_run",
                    {"run_id": paused["run_id"], "timeout_s": 25},
                    progress_callback=await on("wait"),
                )

            async with anyio.create_task_group() as group:
                group.start_soon(wait)  # waiting before the reviewer decides (a CLI start later)
                decided = await anyio.to_thread.run_sync(
                    lambda: sqlgate(
                        [
                            "approvals",
                            "decide",
                            paused["review"]["batch_id"],
                            "--file",
                            str(decisions),
                        ],
                        {**env, **reviewer_env("rita")},
                    )
                )
            answered = waited["result"]
            again = await client.call_tool("ask", {"question": TOP_CATEGORIES})
            return locals()

    got = anyio.run(session)

    paused = got["paused"]
    assert not got["asked"].is_error
    assert paused["status"] == "awaiting_approval"
    assert paused["review"]["command"] == f"sqlgate approvals decide {paused['review']['batch_id']}"
    assert paused["review"]["reviewer_url"] is None
    [waiting] = paused["waiting"]
    assert waiting["question"] == TOP_CATEGORIES and waiting["sql"].startswith(("SELECT", "WITH"))

    early = got["early"]
    assert early.is_error and early.structured_content["error"]["code"] == "awaiting_approval"

    assert got["decided"].returncode == 0, got["decided"].stderr

    answered = got["answered"]
    assert not answered.is_error, answered.content
    report = answered.structured_content
    assert report["status"] == "finished"
    [result] = report["questions"]
    assert result["status"] == "answered" and result["answer"]
    assert result["sql"] == waiting["sql"]
    assert result["rows"] and result["columns"]
    assert result["approvals"][0]["decided_by"] == "rita"
    assert result["approvals"][0]["status"] == "approved"

    # progress: numbered in order per call, the stages in the pipeline's order
    for tool in ("ask", "wait"):
        values = [v for t, v, _ in progress if t == tool]
        assert values == list(range(1, len(values) + 1))
    asked_stages = stages(progress, "ask")
    assert [s for s in asked_stages if s in STAGES_TO_GATE] == STAGES_TO_GATE, progress
    assert asked_stages[-1] in ("waiting for approval", "awaiting_approval")
    waited = stages(progress, "wait")
    assert "running SQL" in waited, progress
    assert waited.index("running SQL") < waited.index("writing the answer")

    # 3 requests of 5 per minute used: a question that may need 5 is refused, with a time
    again = got["again"]
    assert again.is_error
    error = again.structured_content["error"]
    assert error["code"] == "rate_limited"
    assert 0 < error["retry_after"] <= 60


def test_a_client_leaving_during_start_up_ends_the_server_quietly(
    demo_db: Path, tmp_path: Path
) -> None:
    import subprocess

    env = sqlgate_env(
        demo_db, f"sqlite:///{tmp_path / 'state.sqlite'}", "http://127.0.0.1:9/v1", tmp_path
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "leaving", "version": "1"},
        },
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "mcp"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    server.stdout.close()  # the client is gone before the answer is written
    server.stdin.write((json.dumps(initialize) + "\n").encode())
    server.stdin.close()
    stderr = server.stderr.read().decode()
    assert server.wait(timeout=60) == 0, stderr[-2000:]
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr[-2000:]
