"""Reviewed templates become tools, end to end over streamable HTTP (tokens: alice an analyst,
rita a reviewer, root an admin). Statements rita approved are published by root as typed tools;
alice is told the tool list changed, sees them, and calls them: refused arguments, a call a
person approves, then one the policy's earned auto-approval approves (the template was approved
twice), and a call rita rejects. No model is involved anywhere (its client has no reply to give).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from approvals import sql_hash
from orchestrator.llm import LLMSettings
from orchestrator.mcp import McpConfig
from orchestrator.replay import CassetteTransport
from orchestrator.server.auth import TokenRegistry
from orchestrator.state_db import StateDatabase
from safety import Policy
from tests.mcp.test_mcp_http import TOKENS, serving
from tests.mcp.test_mcp_submit_sql import decide

LATEST_ORDERS = "SELECT order_id, status FROM orders WHERE order_id > 3990 ORDER BY order_id"
DEAR_PRODUCTS = "SELECT name, price FROM products WHERE price > 100 ORDER BY price"
#: Two approvals of a template, by one reviewer at least, earn it auto-approval.
POLICY = """
[auto_approval]
enabled = true
min_approvals = 2
min_reviewers = 1
"""


def client(url: str, actor: str, notes: list[str] | None = None) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer tok-{actor}"}, timeout=httpx2.Timeout(30.0)
    )

    async def on_message(message: Any) -> None:
        if notes is not None and not isinstance(message, Exception):
            notes.append(str(getattr(message, "method", "")))

    return Client(
        streamable_http_client(url, http_client=http),
        read_timeout_seconds=60,
        mode="legacy",  # a handshake-era session, as the TypeScript SDK opens
        message_handler=on_message,
    )


def test_published_templates_are_typed_tools_reviewed_or_earned(
    demo_db: Path, state_url: str
) -> None:
    config = McpConfig(
        database_url=f"sqlite:///{demo_db}",
        state_url=state_url,
        tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
        llm=LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        http_client=httpx2.Client(transport=CassetteTransport([])),  # no model reply at all
        policy=Policy.from_toml_text(POLICY),
        poll_interval=0.05,
        sweep_interval=0.2,
    )
    notes: list[str] = []

    async def reviewed(alice: Client, tool: str, arguments: dict[str, Any], decision: Any) -> Any:
        """A call that waits at the gate, then rita's decision, then its end."""
        asked = (await alice.call_tool(tool, arguments)).structured_content
        assert asked["status"] == "awaiting_approval", asked
        await anyio.to_thread.run_sync(
            decide, state_url, asked["review"]["batch_id"], "rita", decision
        )
        return await alice.call_tool("wait_for_run", {"run_id": asked["run_id"], "timeout_s": 20})

    async def session(url: str) -> dict[str, Any]:
        async with client(url, "alice", notes) as alice:
            for sql in (LATEST_ORDERS, DEAR_PRODUCTS):
                done = await reviewed(
                    alice, "submit_sql", {"sql": sql, "purpose": "reviewed once"}, "approve"
                )
                assert not done.is_error, done.structured_content
            state = StateDatabase(state_url)
            examples = {e.sql: e.id for e in state.memory.examples()}
            state.close()
            latest = next(i for sql, i in examples.items() if sql.startswith(LATEST_ORDERS))
            dear = next(i for sql, i in examples.items() if sql.startswith(DEAR_PRODUCTS))
            publish = {
                "name": "orders_above",
                "example_id": latest,
                "parameters": ["amount"],
                "description": "Orders whose id is above a number",
            }
            analyst_publishes = await alice.call_tool("publish_template", publish)
            async with client(url, "root") as root:
                published = await root.call_tool("publish_template", publish)
                too_many = await root.call_tool(
                    "publish_template",
                    {**publish, "name": "too_many", "parameters": ["a", "b", "c"]},
                )
                own_name = await root.call_tool("publish_template", {**publish, "name": "ask"})
                await root.call_tool(
                    "publish_template",
                    {
                        "name": "products_above",
                        "example_id": dear,
                        "parameters": ["price"],
                        "description": "Products dearer than a price",
                    },
                )
            await anyio.sleep(0.2)  # the notifications arrive on alice's open stream
            tools = {t.name: t for t in (await alice.list_tools()).tools}
            injected = await alice.call_tool("orders_above", {"amount": "3995 OR 1=1"})
            extra = await alice.call_tool("orders_above", {"amount": 3995, "approved": True})
            first = await reviewed(alice, "orders_above", {"amount": 3995}, "approve")
            earned = await alice.call_tool("orders_above", {"amount": 3997})
            rejected = await reviewed(
                alice,
                "products_above",
                {"price": 500},
                {"action": "reject", "reason": "prices are not for this agent"},
            )
            return locals()

    with serving(config) as url:
        got = anyio.run(session, url)

    assert got["analyst_publishes"].structured_content["error"]["code"] == "forbidden"
    published = got["published"].structured_content
    assert not got["published"].is_error, published
    assert published["input_schema"]["properties"]["amount"]["type"] == "number"
    assert published["published_by"] == "root"
    assert got["too_many"].structured_content["error"]["code"] == "invalid_input"
    assert got["own_name"].structured_content["error"]["code"] == "invalid_input"
    assert "notifications/tools/list_changed" in got["notes"]

    tool = got["tools"]["orders_above"]
    assert tool.input_schema["required"] == ["amount"]
    assert tool.input_schema["additionalProperties"] is False
    assert "root" in (tool.description or "") and tool.output_schema is not None
    assert "products_above" in got["tools"]

    injected = got["injected"].structured_content["error"]
    assert (
        injected["code"] == "invalid_arguments" and "amount must be a number" in injected["message"]
    )
    assert got["extra"].structured_content["error"]["code"] == "argument_refused"

    # reviewed by a person: the bound value in the SQL, the policy's LIMIT kept
    first = got["first"].structured_content
    assert not got["first"].is_error, first
    [result] = first["questions"]
    assert result["sql"].startswith(
        "SELECT order_id, status FROM orders WHERE order_id > 3995 ORDER BY order_id LIMIT"
    )
    assert [row[0] for row in result["rows"]] == [3996, 3997, 3998, 3999, 4000]
    assert result["approvals"][0]["status"] == "approved"
    assert result["question"].startswith("SQL written by alice (agent), purpose: orders_above(")

    # approved twice: the next call is auto-approved by the earned rule, no person involved
    earned = got["earned"].structured_content
    assert not got["earned"].is_error, earned
    assert earned["status"] == "finished"
    [result] = earned["questions"]
    assert [row[0] for row in result["rows"]] == [3998, 3999, 4000]
    assert result["approvals"][0]["status"] == "auto_approved"
    # the audit log: who asked, that the earned rule approved it, what ran
    state = StateDatabase(state_url)
    events = state.approvals.audit_log(run_id=earned["run_id"])
    state.close()
    [asked] = [e for e in events if e.event == "sql_submitted"]
    assert asked.actor == "alice"
    assert "orders_above(amount=3997)" in asked.detail["statements"][0]["purpose"]
    assert [e for e in events if e.event == "vote_cast"] == []  # no person voted
    [resolved] = [e for e in events if e.event == "batch_resolved"]
    assert resolved.actor == "sqlgate"
    [opened] = [e for e in events if e.event == "batch_opened"]
    assert opened.detail["auto_approved"] and not opened.detail["pending"]
    [ran] = [e for e in events if e.event == "execution_done"]
    assert ran.detail["sql_hash"] == sql_hash(result["sql"])

    rejected = got["rejected"].structured_content["error"]
    assert rejected["code"] == "rejected"
    assert rejected["reason"].endswith("prices are not for this agent")
