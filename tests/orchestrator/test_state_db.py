"""The state database: one location, one migration runner, real timestamps, old files adopted."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from approvals import SchemaVersionError
from approvals.migrations import schema_versions
from orchestrator.state_db import StateDatabase, default_state_url

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LATEST = {"approvals": 3, "memory": 1, "runs": 3, "server": 2}


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    url: str = request.getfixturevalue("postgres_database")
    return url


def test_setup_migrates_every_component_once(state_url: str) -> None:
    state = StateDatabase(state_url)
    state.setup()
    state.setup()
    StateDatabase(state_url).setup()  # another process, same database

    assert state.versions() == LATEST
    with state.engine.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
    assert {"sqlgate_schema", "sqlgate_runs", "sqlgate_server_events"} <= tables
    state.close()


def test_a_database_newer_than_the_code_is_refused(state_url: str) -> None:
    state = StateDatabase(state_url)
    state.setup()
    with state.engine.begin() as conn:
        conn.execute(
            sa.update(schema_versions)
            .where(schema_versions.c.component == "runs")
            .values(version=9)
        )
    fresh = StateDatabase(state_url)
    with pytest.raises(SchemaVersionError, match="upgrade sqlgate"):
        fresh.runs.setup()
    fresh.close()
    state.close()


def test_timestamps_are_timestamps_and_sort_by_time(state_url: str) -> None:
    state = StateDatabase(state_url)
    state.setup()
    server = state.server
    for n in range(3):
        server.create_run(f"run_{n}", "alice", ["how many?"])

    rows = server.runs(owner="alice")

    assert [r.run_id for r in rows] == ["run_2", "run_1", "run_0"]
    created = [datetime.fromisoformat(r.created_at) for r in rows]
    assert all(c.tzinfo is not None for c in created) and created == sorted(created, reverse=True)
    with state.engine.connect() as conn:
        column = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns("sqlgate_server_runs")}
    assert isinstance(column["created_at"], sa.DateTime)
    state.close()


def test_a_state_file_from_before_the_shared_runner_is_adopted_and_migrated(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    shutil.copy(FIXTURES / "state_v1_paused.sqlite3", path)
    state = StateDatabase(f"sqlite:///{path}")

    state.setup()

    assert state.versions() == LATEST
    [run] = state.runs.list()
    assert run["status"] == "awaiting_approval"
    assert run["updated_at"].tzinfo is not None and run["updated_at"] < datetime.now(UTC)
    assert len(state.approvals.pending_batches()) == 1
    state.close()


def test_one_variable_names_the_state_database(tmp_path: Path) -> None:
    assert default_state_url({"SQLGATE_STATE_URL": "postgresql+psycopg://h/db"}) == (
        "postgresql+psycopg://h/db"
    )
    with pytest.warns(DeprecationWarning, match="SQLGATE_STATE_URL"):
        assert default_state_url({"SQLGATE_APPROVALS_URL": "sqlite:///x.db"}) == "sqlite:///x.db"
