"""Row filters through ``sqlgate mcp --transport http``: each agent's SQL is bound to the
attributes of the token it connects with (never a tool argument), so two askers submitting the
same SQL get only their own rows, and one without the attribute is refused
(``row_filter_unbound``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from orchestrator.core.llm import LLMSettings
from orchestrator.core.replay import CassetteTransport
from orchestrator.interfaces.mcp import McpConfig
from orchestrator.interfaces.server.auth import TokenRegistry
from ratelimit import SlidingWindowLimiter
from safety import Policy
from tests.mcp.test_mcp_http import decide_as, serving

LIST_ORDERS = "SELECT order_id, region FROM orders ORDER BY order_id"
TOKENS = [
    {"token": "tok-ann", "actor": "ann", "role": "analyst", "attributes": {"region": "EU"}},
    {"token": "tok-ben", "actor": "ben", "role": "analyst", "attributes": {"region": "US"}},
    {"token": "tok-cal", "actor": "cal", "role": "analyst"},
]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, region TEXT, total REAL)")
        conn.executemany(
            "INSERT INTO orders VALUES (?, ?, ?)",
            [(1, "EU", 10.0), (2, "US", 20.0), (3, "EU", 30.0), (4, "APAC", 40.0)],
        )
    return path


def _client(url: str, actor: str) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer tok-{actor}"}, timeout=httpx2.Timeout(30.0, read=60.0)
    )
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60)


def test_each_agent_gets_only_its_askers_rows(shop: Path, state_url: str) -> None:
    config = McpConfig(
        database_url=f"sqlite:///{shop}",
        state_url=state_url,
        tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
        llm=LLMSettings(base_url="http://127.0.0.1:9/v1", max_attempts=1),
        http_client=httpx2.Client(transport=CassetteTransport([])),  # no model call is made
        limiter=SlidingWindowLimiter(limit=1000, window=60.0, mode="wait"),
        poll_interval=0.05,
        sweep_interval=0.2,
        policy=Policy.from_toml_text('[rows]\n"orders" = "region = {user.region}"\n'),
    )

    async def ask(url: str, actor: str) -> dict[str, Any]:
        async with _client(url, actor) as client:
            checked = await client.call_tool("validate", {"sql": LIST_ORDERS})
            paused = await client.call_tool(
                "submit_sql", {"sql": LIST_ORDERS, "purpose": "every order"}
            )
            if paused.is_error:
                return {"checked": checked, "refused": paused.structured_content["error"]}
            waiting = paused.structured_content
            await anyio.to_thread.run_sync(
                decide_as, state_url, waiting["review"]["batch_id"], "rita"
            )
            done = await client.call_tool(
                "wait_for_run", {"run_id": waiting["run_id"], "timeout_s": 20}
            )
            return {"checked": checked, "waiting": waiting, "done": done.structured_content}

    async def session(url: str) -> dict[str, dict[str, Any]]:
        return {actor: await ask(url, actor) for actor in ("ann", "ben", "cal")}

    with serving(config) as url:
        got = anyio.run(session, url)

    ann, ben, cal = got["ann"], got["ben"], got["cal"]
    assert "region = 'EU'" in ann["checked"].structured_content["sql"]
    assert "region = 'EU'" in ann["waiting"]["waiting"][0]["sql"]
    assert "region = 'US'" in ben["waiting"]["waiting"][0]["sql"]
    [ann_rows] = ann["done"]["questions"]
    [ben_rows] = ben["done"]["questions"]
    assert ann_rows["rows"] == [[1, "EU"], [3, "EU"]]
    assert ben_rows["rows"] == [[2, "US"]]
    assert cal["checked"].is_error
    assert cal["checked"].structured_content["error"]["reason_code"] == "row_filter_unbound"
    assert cal["refused"]["code"] == "unsafe"
    assert cal["refused"]["reason_code"] == "row_filter_unbound"
