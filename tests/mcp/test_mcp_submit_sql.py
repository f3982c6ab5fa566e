"""``submit_sql``: an agent's own SQL through the same validator and the same ONE review, with no
model call at all (the model client here has no reply to give: any call would fail the run).

A refusal (the policy), a rejection and an approval by a person, each end to end; the reviewer
sees the purpose beside each statement (``sqlgate approvals show``), and the audit log
(``sqlgate approvals history``) says who asked, who approved and what ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from approvals import ApprovalGate, sql_hash
from orchestrator.core.llm import LLMSettings
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.mcp import McpConfig, McpService, SqlgateMCPServer
from safety import Policy, SqlValidator
from tests.mcp.conftest import sqlgate, sqlgate_env

BY_CATEGORY = (
    "SELECT c.name, COUNT(*) AS products FROM products AS p "
    "JOIN categories AS c ON c.category_id = p.category_id GROUP BY c.name ORDER BY c.name"
)
ORDERS_BY_STATUS = "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY status"
#: Table and column rules (so every reference is resolved against the schema), and an analyst's
#: narrower section: the caller here is an analyst.
POLICY = """
[tables]
allow = ["orders", "customers", "products", "categories"]

[columns]
deny = ["customers.email"]

[roles.analyst]
tables.allow = ["orders", "products", "categories"]
"""


@pytest.fixture
def server(demo_db: Path, state_url: str) -> SqlgateMCPServer:
    """sqlgate's MCP server for alice (stdio-like: in process), with a model that never answers."""
    return SqlgateMCPServer(
        McpService(
            McpConfig(
                database_url=f"sqlite:///{demo_db}",
                state_url=state_url,
                llm=LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
                actor="alice",
                http_client=httpx2.Client(transport=CassetteTransport([])),  # no reply at all
                poll_interval=0.05,
                sweep_interval=0.2,
                policy=Policy.from_toml_text(POLICY),
            )
        )
    )


def decide(state_url: str, batch_id: str, actor: str, decision: Any) -> None:
    """A person's decision through the approvals gate (as the reviewer page submits it)."""
    state = StateDatabase(state_url)
    record = state.approvals.get_batch(batch_id)
    gate = ApprovalGate(
        reviewer=None,
        validate=SqlValidator(dialect="sqlite").validate,
        store=state.approvals,
        run_id=record.batch.run_id,
        actor=actor,
    )
    gate.submit(batch_id, {cid: decision for cid in record.batch.pending_ids})
    state.close()


def test_refused_rejected_and_approved_sql_with_who_asked_approved_and_ran(
    server: SqlgateMCPServer, demo_db: Path, state_url: str, tmp_path: Path
) -> None:
    async def session() -> dict[str, Any]:
        async with Client(server) as client:
            write = await client.call_tool(
                "submit_sql", {"sql": "DELETE FROM orders", "purpose": "clean up"}
            )
            unknown_column = await client.call_tool(
                "submit_sql", {"sql": "SELECT revenue FROM orders", "purpose": "revenue"}
            )
            other_role = await client.call_tool(
                "submit_sql", {"sql": "SELECT first_name FROM customers", "purpose": "names"}
            )
            neither = await client.call_tool("submit_sql", {"purpose": "nothing"})

            to_reject = await client.call_tool(
                "submit_sql",
                {"sql": "SELECT order_id FROM orders", "purpose": "list every order"},
            )
            paused = to_reject.structured_content
            await anyio.to_thread.run_sync(
                decide,
                state_url,
                paused["review"]["batch_id"],
                "rita",
                {"action": "reject", "reason": "too broad: say which orders"},
            )
            rejected = await client.call_tool(
                "wait_for_run", {"run_id": paused["run_id"], "timeout_s": 20}
            )

            to_approve = await client.call_tool(
                "submit_sql",
                {
                    "statements": [BY_CATEGORY, ORDERS_BY_STATUS],
                    "purpose": "Size the catalogue and the order book for the quarterly note",
                },
            )
            waiting = to_approve.structured_content
            shown = await anyio.to_thread.run_sync(
                lambda: sqlgate(
                    ["approvals", "show", waiting["review"]["batch_id"]],
                    sqlgate_env(
                        demo_db, state_url, "http://127.0.0.1:9/v1", tmp_path, COLUMNS="400"
                    ),
                )
            )
            await anyio.to_thread.run_sync(
                decide, state_url, waiting["review"]["batch_id"], "rita", "approve"
            )
            approved = await client.call_tool(
                "wait_for_run", {"run_id": waiting["run_id"], "timeout_s": 20}
            )
            return locals()

    got = anyio.run(session)

    # refused by the policy before any review: a write, a column that does not resolve
    write = got["write"].structured_content["error"]
    assert got["write"].is_error and write["code"] == "unsafe"
    assert write["reason_code"] == "not_a_query" and "DELETE" in write["reason"]
    assert write["run"]["waiting"] == []
    unknown = got["unknown_column"].structured_content["error"]
    assert unknown["code"] == "unsafe" and unknown["reason_code"] == "unresolved_column"
    assert "revenue" in unknown["reason"]
    [refused] = unknown["run"]["questions"]
    assert refused["sql"] == "SELECT revenue FROM orders"  # never rewritten by a model
    role = got["other_role"].structured_content["error"]
    assert role["code"] == "unsafe" and role["reason_code"] == "table_not_allowed"
    assert got["neither"].structured_content["error"]["code"] == "invalid_input"

    # rejected by a person: nothing ran, the reason comes back
    paused = got["paused"]
    assert paused["status"] == "awaiting_approval"
    [statement] = paused["waiting"]
    assert statement["question"] == "SQL written by alice (agent), purpose: list every order"
    assert statement["sql"] == "SELECT order_id FROM orders LIMIT 1001"  # the policy's LIMIT
    rejected = got["rejected"].structured_content["error"]
    assert rejected["code"] == "rejected"
    assert rejected["reason"].endswith("too broad: say which orders")
    [result] = rejected["run"]["questions"]
    assert result["rows"] == [] and result["row_count"] is None

    # approved by a person in ONE review of both statements, each beside its purpose
    waiting = got["waiting"]
    assert [w["sql"] for w in waiting["waiting"]] == [
        BY_CATEGORY + " LIMIT 1001",
        ORDERS_BY_STATUS + " LIMIT 1001",
    ]
    assert [w["question"] for w in waiting["waiting"]] == [
        "SQL written by alice (agent), purpose: Size the catalogue and the order book for the "
        f"quarterly note (statement {i} of 2)"
        for i in (1, 2)
    ]
    assert got["shown"].returncode == 0, got["shown"].stderr
    shown = " ".join(got["shown"].stdout.split())
    assert shown.count("purpose: Size the catalogue and the order book") == 2
    report = got["approved"].structured_content
    assert not got["approved"].is_error, report
    by_category, by_status = report["questions"]
    assert by_category["status"] == by_status["status"] == "answered"
    assert by_category["columns"] == ["name", "products"] and len(by_category["rows"]) == 8
    assert {row[0] for row in by_status["rows"]} == {
        "cancelled",
        "delivered",
        "returned",
        "shipped",
    }
    assert sum(row[1] for row in by_status["rows"]) == 4000
    assert by_status["approvals"][0]["decided_by"] == "rita"
    assert "Row count: 4" in by_status["answer"]  # the result itself, written without a model

    # the audit log: who asked (alice), who approved (rita), what ran (the approved SQL's hash)
    env = sqlgate_env(demo_db, state_url, "http://127.0.0.1:9/v1", tmp_path)
    history = sqlgate(["approvals", "history", "--run", report["run_id"], "--json"], env)
    assert history.returncode == 0, history.stderr
    events = json.loads(history.stdout)
    [asked] = [e for e in events if e["event"] == "sql_submitted"]
    assert asked["actor"] == "alice"
    assert [s["sql"] for s in asked["detail"]["statements"]] == [BY_CATEGORY, ORDERS_BY_STATUS]
    assert "rita" in {e["actor"] for e in events if e["event"] in ("vote_cast", "batch_resolved")}
    ran = {e["detail"]["sql_hash"] for e in events if e["event"] == "execution_done"}
    assert ran == {sql_hash(w["sql"]) for w in waiting["waiting"]}


def test_on_stdio_the_login_the_agent_runs_as_is_an_author_whatever_actor_it_chose(
    demo_db: Path, state_url: str
) -> None:
    """``SQLGATE_MCP_ACTOR`` names an agent's runs; it does not make the login that runs the
    agent someone else. Under four eyes that login cannot approve its agent's SQL at the command
    line (which proves the same login), and another reviewer can."""
    from approvals import AuthorMayNotDecide
    from orchestrator.interfaces.mcp.config import login_name

    server = SqlgateMCPServer(
        McpService(
            McpConfig(
                database_url=f"sqlite:///{demo_db}",
                state_url=state_url,
                llm=LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
                actor="reporting-bot",  # chosen by SQLGATE_MCP_ACTOR
                http_client=httpx2.Client(transport=CassetteTransport([])),
                poll_interval=0.05,
                sweep_interval=0.2,
                policy=Policy.from_toml_text(POLICY + "\n[approvals]\nfour_eyes = true\n"),
            )
        )
    )

    async def session() -> dict[str, Any]:
        async with Client(server) as client:
            submitted = await client.call_tool(
                "submit_sql", {"sql": ORDERS_BY_STATUS, "purpose": "order book"}
            )
            return submitted.structured_content

    paused = anyio.run(session)
    batch_id = paused["review"]["batch_id"]
    state = StateDatabase(state_url)
    record = state.approvals.get_batch(batch_id)
    assert set(record.batch.authors) == {"reporting-bot", login_name()}
    state.close()
    with pytest.raises(AuthorMayNotDecide):
        decide(state_url, batch_id, login_name(), "approve")
    decide(state_url, batch_id, "rita", "approve")
