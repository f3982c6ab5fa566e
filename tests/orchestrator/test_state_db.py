"""The state database: one location, one migration runner, real timestamps, old files adopted."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from approvals import SchemaVersionError
from approvals.migrations import schema_versions
from orchestrator.state_db import StateDatabase, default_state_url

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LATEST = {"approvals": 3, "memory": 1, "results": 1, "runs": 4, "server": 3}


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.sqlite3'}"
        return
    base = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
    if not base:
        pytest.skip("SQLGATE_TEST_POSTGRES_URL is not set")
    name = f"sqlgate_state_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield sa.make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()


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


def test_a_follow_up_keeps_its_parent_and_runs_are_searched_literally(state_url: str) -> None:
    from orchestrator.checkpoint import StartedCheckpoint

    state = StateDatabase(state_url)
    state.setup()
    server = state.server
    server.create_run("run_a", "alice", ["Show me the best ones."])
    server.create_run("run_b", "alice", ["Show me the best ones.\n\n- [metric] Answer: 100%"])
    server.create_run("run_c", "alice", ["Prix moyen en été ?"], follow_up_of="run_a")
    server.create_run("run_d", "bob", ["Show me the BEST ones."])
    state.runs.create(
        "run_c",
        "sqlite:///x",
        StartedCheckpoint(run_id="run_c", questions=["q"]),
        follow_up_of="run_a",
    )

    assert server.run("run_c").follow_up_of == "run_a"
    assert state.runs.load("run_c").follow_up_of == "run_a"
    assert server.follow_ups(["run_a", "run_b"]) == {"run_a": ["run_c"], "run_b": []}
    assert [r.run_id for r in server.runs(owner="alice", q="best ONES")] == ["run_b", "run_a"]
    assert [r.run_id for r in server.runs(owner="alice", q="best", offset=1)] == ["run_a"]
    assert [r.run_id for r in server.runs(q="100%")] == ["run_b"]  # % is literal
    assert server.runs(q="best_ones") == []  # so is _
    assert [r.run_id for r in server.runs(q="été")] == ["run_c"]
    assert [r.run_id for r in server.runs(q="RUN_D")] == ["run_d"]  # run ids too
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
    assert run["status"] == "awaiting_approval" and run["follow_up_of"] is None
    assert run["updated_at"].tzinfo is not None and run["updated_at"] < datetime.now(UTC)
    assert len(state.approvals.pending_batches()) == 1
    state.close()


def test_one_variable_names_the_state_database(tmp_path: Path) -> None:
    assert default_state_url({"SQLGATE_STATE_URL": "postgresql+psycopg://h/db"}) == (
        "postgresql+psycopg://h/db"
    )
    with pytest.warns(DeprecationWarning, match="SQLGATE_STATE_URL"):
        assert default_state_url({"SQLGATE_APPROVALS_URL": "sqlite:///x.db"}) == "sqlite:///x.db"
