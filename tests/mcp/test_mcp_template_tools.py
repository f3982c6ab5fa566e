"""Reviewed templates become tools, end to end over streamable HTTP with the Python SDK's and the
official TypeScript SDK's clients (tokens: alice an analyst, rita a reviewer, root an admin).
Statements rita approved are published by root as typed tools; alice is told the tool list
changed, sees them, and calls them: refused arguments, a call a person approves, then one the
policy's earned auto-approval approves (the template was approved twice), and a call rita
rejects. No model is involved anywhere (its client has no reply to give).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from approvals import sql_hash
from orchestrator.core.llm import LLMSettings
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.mcp import McpConfig
from orchestrator.interfaces.server.auth import TokenRegistry
from safety import Policy
from tests.mcp.drivers import Driver, node_http, node_ready, python_http
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


@pytest.fixture(params=["python", "typescript"])
def connect(request: pytest.FixtureRequest) -> Callable[[str, str], Any]:
    """A handshake-era HTTP client of the Python SDK, or the official TypeScript SDK client."""
    if request.param == "typescript":
        why = node_ready()
        if why:
            pytest.skip(why)
        return node_http
    return lambda url, token: python_http(url, token, legacy=True)


def test_published_templates_are_typed_tools_reviewed_or_earned(
    demo_db: Path, state_url: str, connect: Callable[[str, str], Any]
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

    async def reviewed(alice: Driver, tool: str, arguments: dict[str, Any], decision: Any) -> Any:
        """A call that waits at the gate, then rita's decision, then its end."""
        asked = (await alice.call(tool, arguments))["structuredContent"]
        assert asked["status"] == "awaiting_approval", asked
        await anyio.to_thread.run_sync(
            decide, state_url, asked["review"]["batch_id"], "rita", decision
        )
        return await alice.call("wait_for_run", {"run_id": asked["run_id"], "timeout_s": 20})

    async def session(url: str) -> dict[str, Any]:
        async with connect(url, "tok-alice") as alice:
            for sql in (LATEST_ORDERS, DEAR_PRODUCTS):
                done = await reviewed(
                    alice, "submit_sql", {"sql": sql, "purpose": "reviewed once"}, "approve"
                )
                assert not done["isError"], done
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
            analyst_publishes = await alice.call("publish_template", publish)
            before = await alice.notifications()
            async with connect(url, "tok-root") as root:
                published = await root.call("publish_template", publish)
                too_many = await root.call(
                    "publish_template",
                    {**publish, "name": "too_many", "parameters": ["a", "b", "c"]},
                )
                own_name = await root.call("publish_template", {**publish, "name": "ask"})
                await root.call(
                    "publish_template",
                    {
                        "name": "products_above",
                        "example_id": dear,
                        "parameters": ["price"],
                        "description": "Products dearer than a price",
                    },
                )
            notes: list[str] = []
            with anyio.fail_after(10):  # the notifications arrive on alice's open stream
                while len(notes) < 2:
                    notes += await alice.notifications()
                    await anyio.sleep(0.05)
            tools = {t["name"]: t for t in await alice.list_tools()}
            injected = await alice.call("orders_above", {"amount": "3995 OR 1=1"})
            extra = await alice.call("orders_above", {"amount": 3995, "approved": True})
            first = await reviewed(alice, "orders_above", {"amount": 3995}, "approve")
            earned = await alice.call("orders_above", {"amount": 3997})
            rejected = await reviewed(
                alice,
                "products_above",
                {"price": 500},
                {"action": "reject", "reason": "prices are not for this agent"},
            )
            return locals()

    with serving(config) as url:
        got = anyio.run(session, url)

    assert got["analyst_publishes"]["structuredContent"]["error"]["code"] == "forbidden"
    published = got["published"]["structuredContent"]
    assert not got["published"]["isError"], published
    assert published["input_schema"]["properties"]["amount"]["type"] == "number"
    assert published["published_by"] == "root"
    assert got["too_many"]["structuredContent"]["error"]["code"] == "invalid_input"
    assert got["own_name"]["structuredContent"]["error"]["code"] == "invalid_input"
    assert got["before"] == []
    assert got["notes"] == ["notifications/tools/list_changed"] * 2  # one per publication

    tool = got["tools"]["orders_above"]
    assert tool["inputSchema"]["required"] == ["amount"]
    assert tool["inputSchema"]["additionalProperties"] is False
    assert "root" in tool["description"] and "anyOf" in tool["outputSchema"]
    assert "products_above" in got["tools"]

    injected = got["injected"]["structuredContent"]["error"]
    assert (
        injected["code"] == "invalid_arguments" and "amount must be a number" in injected["message"]
    )
    assert got["extra"]["structuredContent"]["error"]["code"] == "argument_refused"

    # reviewed by a person: the bound value in the SQL, the policy's LIMIT kept
    first = got["first"]["structuredContent"]
    assert not got["first"]["isError"], first
    [result] = first["questions"]
    assert result["sql"].startswith(
        "SELECT order_id, status FROM orders WHERE order_id > 3995 ORDER BY order_id LIMIT"
    )
    assert [row[0] for row in result["rows"]] == [3996, 3997, 3998, 3999, 4000]
    assert result["approvals"][0]["status"] == "approved"
    assert result["question"].startswith("SQL written by alice (agent), purpose: orders_above(")

    # approved twice: the next call is auto-approved by the earned rule, no person involved
    earned = got["earned"]["structuredContent"]
    assert not got["earned"]["isError"], earned
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

    rejected = got["rejected"]["structuredContent"]["error"]
    assert rejected["code"] == "rejected"
    assert rejected["reason"].endswith("prices are not for this agent")
