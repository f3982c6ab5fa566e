"""The state database: one location, one migration runner, real timestamps, old files adopted."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from approvals import ApprovalBatch, SchemaVersionError, sql_store
from approvals.migrations import migrate, schema_versions, state_engine
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.state_db import StateDatabase, default_state_url

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LATEST = {"approvals": 5, "memory": 3, "notifications": 2, "results": 1, "runs": 6, "server": 3}


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


def test_a_follow_up_keeps_its_parent_and_runs_are_searched_literally(state_url: str) -> None:
    from orchestrator.core.checkpoint import StartedCheckpoint

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
        login=DatabaseLogin(""),
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
    [batch] = state.approvals.pending_batches()
    assert batch.batch.created_at.tzinfo is not None
    [summary] = state.approvals.list_summaries()
    assert summary.created_at == batch.batch.created_at  # the text time, now a timestamp
    [opened] = state.approvals.audit_log(batch_id=batch.batch_id)
    assert opened.at == summary.created_at and opened.event == "batch_opened"
    state.close()


def test_approvals_times_written_as_text_become_timestamps_with_their_data(
    state_url: str,
) -> None:
    engine = state_engine(state_url)
    migrate(engine, "approvals", sql_store.MIGRATIONS[:3])  # the schema of the previous release
    at = datetime(2026, 3, 1, 10, tzinfo=UTC)
    body = {
        name: ApprovalBatch(
            batch_id=name, run_id="run_a", cycle=1, created_at=at, items=[], categories={}
        ).model_dump_json()
        for name in ("batch_a", "batch_b")
    }
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sqlgate_approval_batches (batch_id, run_id, cycle, status, version, "
                "created_at, deadline, batch) VALUES "
                "('batch_a', 'run_a', 1, 'pending', 1, '2026-03-01T10:00:00.000001+00:00', "
                "'2026-03-01T11:00:00.000000+00:00', :a), "
                "('batch_b', 'run_a', 2, 'pending', 1, '2026-03-01T09:59:59.999999+00:00', NULL, :b)"
            ),
            {"a": body["batch_a"], "b": body["batch_b"]},
        )
        conn.exec_driver_sql(
            "INSERT INTO sqlgate_approval_audit (at, run_id, batch_id, event, actor, detail) "
            "VALUES ('2026-03-01T10:00:00.000001+00:00', 'run_a', 'batch_a', 'batch_opened', "
            "'sqlgate', '{}')"
        )
        conn.exec_driver_sql(
            "INSERT INTO sqlgate_approval_executions (call_id, batch_id, run_id, sql_hash, state, "
            "actor, started_at, finished_at) VALUES "
            "('call_1', 'batch_a', 'run_a', 'h', 'done', 'rita', "
            "'2026-03-01T10:05:00.000000+00:00', '2026-03-01T10:05:01.500000+00:00'), "
            "('call_2', 'batch_a', 'run_a', 'h', 'started', 'rita', "
            "'2026-03-01T10:06:00.000000+00:00', NULL)"
        )
    engine.dispose()

    state = StateDatabase(state_url)
    state.setup()

    assert state.versions()["approvals"] == len(sql_store.MIGRATIONS)
    summaries = {s.batch_id: s for s in state.approvals.list_summaries(status=None)}
    assert summaries["batch_a"].created_at == at + timedelta(microseconds=1)
    assert summaries["batch_a"].deadline == at + timedelta(hours=1)
    assert summaries["batch_b"].created_at == at - timedelta(microseconds=1)
    assert summaries["batch_b"].deadline is None
    [event] = state.approvals.audit_log(run_id="run_a")
    assert event.at == at + timedelta(microseconds=1) and event.event == "batch_opened"
    done, started = state.approvals.executions(run_id="run_a")
    assert done.started_at == at + timedelta(minutes=5)
    assert done.finished_at == at + timedelta(minutes=5, seconds=1.5)
    assert started.finished_at is None
    assert [b.batch_id for b in state.approvals.due_batches(at + timedelta(hours=2))] == ["batch_a"]
    assert state.approvals.due_batches(at + timedelta(minutes=59)) == []
    with state.engine.connect() as conn:
        inspector = sa.inspect(conn)
        for table, columns in TIME_COLUMNS.items():
            types = {c["name"]: c["type"] for c in inspector.get_columns(table)}
            assert all(isinstance(types[c], sa.DateTime) for c in columns), (table, types)
    state.close()


TIME_COLUMNS = {
    "sqlgate_approval_batches": ["created_at", "deadline"],
    "sqlgate_approval_audit": ["at"],
    "sqlgate_approval_executions": ["started_at", "finished_at"],
}


def test_one_variable_names_the_state_database(tmp_path: Path) -> None:
    assert default_state_url({"SQLGATE_STATE_URL": "postgresql+psycopg://h/db"}) == (
        "postgresql+psycopg://h/db"
    )
    with pytest.warns(DeprecationWarning, match="SQLGATE_STATE_URL"):
        assert default_state_url({"SQLGATE_APPROVALS_URL": "sqlite:///x.db"}) == "sqlite:///x.db"
