"""``GET /runs/{id}/rows``: a question's full result a page at a time, with the run's caps and the
run's access rules; a result cut by the policy's LIMIT says so here and in the run."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.interfaces.server import create_app
from safety import Policy
from tests.scripted_llm import scenarios as sc
from tests.scripted_llm.server import ScriptedLLMServer
from tests.server.conftest import Running, make_config, start_server, stop_server
from tests.server.server_helpers import pending_batch, wait_for_run

ORDERS_SQL = sc.SCENARIOS[sc.ORDERS_2025].sql


def _direct(db: Path) -> list[list[Any]]:
    with sqlite3.connect(db) as conn:
        return [list(row) for row in conn.execute(ORDERS_SQL)]


def _answered(live: Running, question: str) -> tuple[str, dict[str, Any]]:
    with live.client("alice") as alice, live.client("rita") as rita:
        run_id = alice.post("/runs", json={"question": question}).json()["run_id"]
        batch = pending_batch(rita, run_id)
        rita.post(
            f"/approvals/{batch['batch_id']}/decision",
            json={"decisions": {call_id: "approve" for call_id in batch["pending_ids"]}},
        ).raise_for_status()
        run = wait_for_run(alice, run_id, ("finished",))
    return run_id, run["results"][0]


def _all_rows(live: Running, run_id: str, page: int) -> tuple[list[list[Any]], dict[str, Any]]:
    rows: list[list[Any]] = []
    offset: int | None = 0
    first: dict[str, Any] = {}
    with live.client("alice") as alice:
        while offset is not None:
            got = alice.get(f"/runs/{run_id}/rows", params={"offset": offset, "limit": page})
            assert got.status_code == 200, got.text
            body = got.json()
            first = first or body
            assert body["offset"] == offset
            rows += body["rows"]
            offset = body["next_offset"]
    return rows, first


@pytest.fixture
def live_high_cap(
    demo_db: Path, state_url: str, scripted_model: ScriptedLLMServer
) -> Iterator[Running]:
    config = make_config(
        demo_db,
        state_url,
        scripted_model,
        policy=Policy(row_cap=100_000, max_limit=100_000),
    )
    server, thread, base_url = start_server(create_app(config))
    try:
        yield Running(base_url, None, state_url)
    finally:
        stop_server(server, thread)


def test_with_a_high_cap_the_pages_add_up_to_a_direct_query(
    live_high_cap: Running, demo_db: Path
) -> None:
    expected = _direct(demo_db)
    run_id, result = _answered(live_high_cap, sc.ORDERS_2025)

    assert (result["truncated"], result["row_count"]) == (False, len(expected))
    rows, first = _all_rows(live_high_cap, run_id, page=700)

    assert rows == expected
    assert first["columns"] == ["order_id", "order_date", "status"]
    assert (first["row_count"], first["truncated"]) == (len(expected), False)


def test_a_cut_result_says_truncated_in_the_run_and_in_its_rows(
    live: Running, demo_db: Path
) -> None:
    run_id, result = _answered(live, sc.ORDERS_2025)

    assert (result["truncated"], result["row_count"]) == (True, 1000)
    assert any(w.startswith("row_cap_hit:") for w in result["warnings"])
    assert "the result was cut" in result["answer"]
    rows, first = _all_rows(live, run_id, page=10_000)
    assert rows == _direct(demo_db)[:1000]
    assert (first["truncated"], first["row_cap"], first["next_offset"]) == (True, 1000, None)


def test_rows_follow_the_run_endpoints_rules(live: Running) -> None:
    run_id, _ = _answered(live, sc.PRODUCT_COUNT)
    path = f"/runs/{run_id}/rows"

    with live.client() as nobody:
        assert nobody.get(path).status_code == 401
    with live.client("rita") as reviewer:
        assert reviewer.get(path).status_code == 403
    with live.client("bob") as other_analyst:
        assert other_analyst.get(path).status_code == 404  # not bob's run: not even its existence
    with live.client("root") as admin:
        assert admin.get(path).json()["row_count"] > 0
    with live.client("alice") as alice:
        assert alice.get(path, params={"question": "q2"}).status_code == 404
        assert alice.get(path, params={"limit": 0}).status_code == 422
        assert alice.get(path, params={"limit": 10_001}).status_code == 422
        past = alice.get(path, params={"offset": 10_000}).json()
        assert (past["rows"], past["next_offset"]) == ([], None)
