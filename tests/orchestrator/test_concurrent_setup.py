"""Eight processes set up one fresh state database at the same moment: every one succeeds and
each component ends migrated once (the lock is taken before anything is created)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from approvals import sql_store
from orchestrator.core import result_rows, runs, server_state
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import store as memory_store
from orchestrator.features.notify import outbox
from orchestrator.wiring import state_database

PROCESSES = 8
LATEST = {
    "approvals": len(sql_store.MIGRATIONS),
    "memory": len(memory_store.MIGRATIONS),
    "notifications": len(outbox.MIGRATIONS),
    "results": len(result_rows.MIGRATIONS),
    "runs": len(runs.MIGRATIONS),
    "server": len(server_state.MIGRATIONS),
}


def _set_up(url: str, barrier: Any, outcomes: Any) -> None:
    state = state_database(url)  # as every entry point opens it: with the features' stores
    barrier.wait(timeout=120)  # every process imported everything: now all at once
    try:
        state.setup()
        outcomes.put("ok")
    except Exception as exc:  # reported to the test, which names it
        outcomes.put(f"{type(exc).__name__}: {exc}")
    finally:
        state.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh' / 'state.sqlite'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


def test_eight_processes_setting_up_a_fresh_state_database_at_once_all_succeed(
    fresh_state_url: str,
) -> None:
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(PROCESSES)
    outcomes = spawn.Queue()
    procs = [
        spawn.Process(target=_set_up, args=(fresh_state_url, barrier, outcomes))
        for _ in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=180)
    results = [outcomes.get(timeout=5) for _ in procs]

    assert results == ["ok"] * PROCESSES, results
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    state = StateDatabase(fresh_state_url)
    assert state.versions() == LATEST
    with state.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT count(*) FROM sqlgate_schema")).scalar_one()
    assert rows == len(LATEST)
    state.close()
