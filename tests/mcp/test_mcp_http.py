"""``sqlgate mcp --transport http``: streamable HTTP behind the bearer tokens of ``sqlgate serve``,
served by uvicorn on 127.0.0.1 in this process and driven by the MCP SDK's own client."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

from approvals import ApprovalGate
from orchestrator.core.llm import LLMSettings
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.mcp import McpConfig, create_http_app
from orchestrator.interfaces.server.auth import TokenRegistry
from ratelimit import SlidingWindowLimiter
from safety import SqlValidator
from tests.mcp.conftest import SCRIPTED_MODEL
from tests.mcp.model_server import CassetteModelServer
from tests.scripted_llm.scenarios import COUNT_QUESTIONS, DELETE_CANCELLED

TOKENS = [
    {"token": "tok-alice", "actor": "alice", "role": "analyst"},
    {"token": "tok-bob", "actor": "bob", "role": "analyst"},
    {"token": "tok-rita", "actor": "rita", "role": "reviewer"},
    {"token": "tok-root", "actor": "root", "role": "admin"},
]
REVIEWER_PAGE = "http://sqlgate.example/reviewer"


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # not the main thread
        pass


def mcp_config(
    demo_db: Path, state_url: str, model: CassetteModelServer, **overrides: Any
) -> McpConfig:
    values: dict[str, Any] = dict(
        database_url=f"sqlite:///{demo_db}",
        state_url=state_url,
        tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
        llm=LLMSettings(model=SCRIPTED_MODEL, base_url=model.base_url, max_attempts=1),
        limiter=SlidingWindowLimiter(limit=1000, window=60.0, mode="wait"),
        reviewer_url=REVIEWER_PAGE,
        poll_interval=0.05,
        sweep_interval=0.2,
    )
    values.update(overrides)
    return McpConfig(**values)


@contextmanager
def serving(config: McpConfig) -> Iterator[str]:
    """``create_http_app`` under uvicorn on a free port of 127.0.0.1; yields the /mcp URL."""
    with serving_app(create_http_app(config)) as base:
        yield f"{base}/mcp"


@contextmanager
def serving_app(app: Any) -> Iterator[str]:
    """An ASGI app under uvicorn on a free port of 127.0.0.1; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def mcp_url(
    demo_db: Path, state_url: str, model: CassetteModelServer, allow_local_model: None
) -> Iterator[str]:
    with serving(mcp_config(demo_db, state_url, model)) as url:
        yield url


def client(url: str, actor: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer tok-{actor}"},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    return Client(
        streamable_http_client(url, http_client=http), read_timeout_seconds=120, **options
    )


def decide_as(state_url: str, batch_id: str, actor: str) -> str:
    """A reviewer's decision through the approvals gate (as the reviewer page submits it)."""
    state = StateDatabase(state_url)
    record = state.approvals.get_batch(batch_id)
    gate = ApprovalGate(
        reviewer=None,
        validate=SqlValidator(dialect="sqlite").validate,
        store=state.approvals,
        run_id=record.batch.run_id,
        actor=actor,
    )
    outcome = gate.submit(batch_id, {cid: "approve" for cid in record.batch.pending_ids})
    state.close()
    return str(outcome.status)


def test_no_token_no_session(mcp_url: str) -> None:
    response = httpx2.post(mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert response.headers["www-authenticate"] == "Bearer"


def test_batched_ask_over_http_paused_decided_by_a_reviewer_then_answered(
    mcp_url: str, state_url: str
) -> None:
    questions = COUNT_QUESTIONS[:2]
    progress: list[tuple[str, float, str | None]] = []

    async def record(value: float, total: float | None, message: str | None) -> None:
        progress.append(("ask", value, message))

    async def session() -> dict[str, Any]:
        async with client(mcp_url, "alice") as alice:
            tools = {t.name for t in (await alice.list_tools()).tools}
            asked = await alice.call_tool("ask", {"questions": questions}, progress_callback=record)
            run_id = asked.structured_content["run_id"]
            refused = await alice.call_tool("run_status", {"run_id": run_id, "decision": "approve"})
            status = await alice.call_tool("run_status", {"run_id": run_id})
            async with client(mcp_url, "rita") as rita:
                reviewer_asks = await rita.call_tool("ask", {"question": questions[0]})
            async with client(mcp_url, "bob") as bob:
                foreign = await bob.call_tool("run_status", {"run_id": run_id})
            batch_id = asked.structured_content["review"]["batch_id"]
            decided = await anyio.to_thread.run_sync(decide_as, state_url, batch_id, "rita")
            answered = await alice.call_tool("wait_for_run", {"run_id": run_id, "timeout_s": 25})
            return locals()

    got = anyio.run(session)

    assert "ask" in got["tools"] and not {"approve", "decide"} & got["tools"]
    paused = got["asked"].structured_content
    assert paused["status"] == "awaiting_approval"
    assert paused["review"]["reviewer_url"] == REVIEWER_PAGE
    assert [w["question"] for w in paused["waiting"]] == questions  # ONE review for both
    for waiting in paused["waiting"]:  # each with the risk a reviewer sees, taken before review
        assert waiting["risk"]["level"] in ("low", "medium", "high")
        assert waiting["risk"]["engine"] == "sqlite" and waiting["risk"]["tables"]
    assert got["refused"].structured_content["error"]["code"] == "argument_refused"
    assert got["status"].structured_content["status"] == "awaiting_approval"
    assert got["reviewer_asks"].structured_content["error"]["code"] == "forbidden"
    assert got["foreign"].structured_content["error"]["code"] == "run_not_found"
    assert got["decided"] == "resolved"

    answered = got["answered"]
    assert not answered.is_error, answered.content
    report = answered.structured_content
    assert report["status"] == "finished"
    assert [q["status"] for q in report["questions"]] == ["answered", "answered"]
    for result, waiting in zip(report["questions"], paused["waiting"], strict=True):
        assert result["sql"] == waiting["sql"]
        assert result["approvals"][0]["decided_by"] == "rita"
        assert isinstance(result["truncated"], bool)
    # progress of ask: numbered 1..n in order, the stages in the pipeline's order
    asked = [(v, m) for tool, v, m in progress if tool == "ask"]
    assert [v for v, _ in asked] == list(range(1, len(asked) + 1))
    stages = [(m or "").split(" (")[0] for _, m in asked]
    assert (
        stages.index("reasoning")
        < stages.index("writing SQL")
        < stages.index("waiting for approval")
    )


def test_elicitation_asks_the_person_at_the_client_only_when_their_token_may_decide(
    demo_db: Path, state_url: str, model: CassetteModelServer, allow_local_model: None
) -> None:
    asked_people: list[tuple[str, str]] = []

    def person(actor: str, decision: str) -> Any:
        async def answer(context: Any, params: Any) -> ElicitResult:
            asked_people.append((actor, params.message))
            return ElicitResult(action="accept", content={"decision": decision, "reason": ""})

        return answer

    async def session(url: str) -> dict[str, Any]:
        # A handshake-era session has the back-channel elicitation needs.
        async with client(
            url, "root", mode="legacy", elicitation_callback=person("root", "approve")
        ) as root:
            approved = await root.call_tool("ask", {"question": COUNT_QUESTIONS[2]})
        async with client(
            url, "alice", mode="legacy", elicitation_callback=person("alice", "approve")
        ) as alice:
            analyst = await alice.call_tool("ask", {"question": COUNT_QUESTIONS[3]})
        # A session without a back-channel: the run stays at the gate for a reviewer elsewhere.
        async with client(
            url, "root", elicitation_callback=person("root-modern", "approve")
        ) as root:
            modern = await root.call_tool("ask", {"question": COUNT_QUESTIONS[4]})
        return locals()

    with serving(mcp_config(demo_db, state_url, model, elicit=True)) as url:
        got = anyio.run(session, url)

    approved = got["approved"]
    assert not approved.is_error, approved.content
    [result] = approved.structured_content["questions"]
    assert result["status"] == "answered"
    assert result["approvals"][0]["decided_by"] == "root"  # the token's actor
    assert [who for who, _ in asked_people] == ["root"]  # never the analyst, nor without a channel
    assert result["sql"] in asked_people[0][1]
    assert got["analyst"].structured_content["status"] == "awaiting_approval"
    assert got["modern"].structured_content["status"] == "awaiting_approval"
    # recorded as a decision taken at the client, apart from a review on the reviewer page
    state = StateDatabase(state_url)
    run_id = approved.structured_content["run_id"]
    [marker] = [
        e for e in state.approvals.audit_log(run_id=run_id) if e.event == "decided_at_client"
    ]
    state.close()
    assert marker.actor == "root"
    assert marker.detail == {"via": "mcp elicitation", "role": "admin", "decision": "approve"}


def test_sql_the_validator_refuses_ends_the_ask_with_an_unsafe_tool_error(
    mcp_url: str, state_url: str
) -> None:
    async def session() -> Any:
        async with client(mcp_url, "alice") as alice:
            return await alice.call_tool("ask", {"question": DELETE_CANCELLED})

    refused = anyio.run(session)

    assert refused.is_error
    error = refused.structured_content["error"]
    assert error["code"] == "unsafe"
    assert "DELETE" in error["reason"]
    [result] = error["run"]["questions"]
    assert result["status"] == "unsafe" and not result["rows"]
    # nothing waited for a reviewer: a refused statement is shown, never approvable
    assert error["run"]["waiting"] == []
