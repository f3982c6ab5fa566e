"""A run executes as the login it was asked with: two logins under PostgreSQL row-level security.

One PostgreSQL database, one ``orders`` table with row-level security: the login ``reader``
sees half of the rows, the superuser the test server logs in as sees them all, and the
NOLOGIN roles ``north`` and ``south`` (which ``reader`` may ``SET ROLE`` to) see one region
each. A statement asked through the reader and approved must return the reader's rows on every
path that carries it on (``sqlgate resume``, ``runs recover``, the worker, the run service of
``serve`` and of ``sqlgate mcp``), and a process that logs in as the superuser must leave it
alone: nothing run, the run as it was. The same approved statement asked by two roles mapped
to ``north`` and ``south`` returns each role's rows. No model request is made: the caller's
own SQL goes through the gate (``statements=``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import orchestrator.interfaces.tasks
from approvals import ApprovalGate, Approve
from orchestrator.core.checkpoint import FinishedCheckpoint
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import WrongDatabase
from orchestrator.core.llm import LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.result import WRONG_DATABASE_EXIT, RunResult, RunStatus
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.cli.main import app
from orchestrator.interfaces.mcp.config import McpConfig
from orchestrator.interfaces.mcp.service import McpService
from orchestrator.interfaces.server.runner import RunService
from safety import Policy
from tests.fixtures.rls import SQL, RlsDatabase, rls_database
from tests.orchestrator.conftest import Harness

runner = CliRunner()
#: A model client is built (no cassette): any model request would fail the test.
pytestmark = pytest.mark.vcr

PURPOSE = "orders per region"


@pytest.fixture
def rls(postgres_database: str) -> Iterator[RlsDatabase]:
    with rls_database(postgres_database) as made:
        yield made


@pytest.fixture
def state_url(tmp_path: Any) -> str:
    return f"sqlite:///{tmp_path / 'state.sqlite'}"


@pytest.fixture
def cli_env(
    monkeypatch: pytest.MonkeyPatch, model_endpoint: tuple[str, str], state_url: str
) -> str:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    monkeypatch.delenv("SQLGATE_DB", raising=False)
    return state_url


def _pipeline(
    harness: Harness, url: str, state: StateDatabase, policy: Policy | None = None
) -> Pipeline:
    return Pipeline(
        TargetDatabase(url, policy=policy),
        harness.llm(),
        None,
        approval_store=state.approvals,
        run_store=state.runs,
    )


def _ask(
    harness: Harness,
    url: str,
    state: StateDatabase,
    *,
    policy: Policy | None = None,
    role: str | None = None,
) -> str:
    pipeline = _pipeline(harness, url, state, policy)
    [paused] = pipeline.run_batch([PURPOSE], statements=[SQL], role=role)
    pipeline.db.dispose()
    assert paused.status == RunStatus.AWAITING_APPROVAL, paused.error
    return paused.run_id


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def _approve(state: StateDatabase, run_id: str) -> None:
    [record] = state.approvals.pending_batches(run_id=run_id)
    gate = ApprovalGate(reviewer=None, validate=lambda sql: _Accepted(sql), store=state.approvals)
    gate.submit(
        record.batch_id, {i.call_id: Approve() for i in record.batch.pending}, actor="alice"
    )


def _finished_rows(state: StateDatabase, run_id: str) -> list[list[Any]]:
    checkpoint = state.runs.load(run_id).checkpoint
    assert isinstance(checkpoint, FinishedCheckpoint), type(checkpoint)
    [result] = checkpoint.results
    assert result.status == RunStatus.ANSWERED, result.error
    return result.rows_preview


def _untouched(state: StateDatabase, run_id: str, before: Any) -> None:
    after = state.runs.load(run_id)
    assert (after.status, after.version) == (before.status, before.version)
    assert state.approvals.executions(run_id=run_id) == []


def _cli(*args: str, code: int) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if "--json" in args else result.output


class TestTheRunRecordsItsLogin:
    def test_the_run_records_the_reader_and_the_superuser_differs(
        self, rls: RlsDatabase, harness: Harness, state_url: str
    ) -> None:
        state = StateDatabase(state_url)
        run_id = _ask(harness, rls.reader, state)
        assert state.runs.load(run_id).login == DatabaseLogin(rls.reader_user)
        [record] = state.approvals.pending_batches(run_id=run_id)
        assert record.batch.context["login"] == rls.reader_user  # what the reviewer is shown
        assert rls.rows(rls.reader) != rls.rows(rls.superuser)

    def test_sqlgate_resume_with_another_login_runs_nothing(
        self, rls: RlsDatabase, harness: Harness, cli_env: str
    ) -> None:
        state = StateDatabase(cli_env)
        run_id = _ask(harness, rls.reader, state)
        _approve(state, run_id)
        before = state.runs.load(run_id)

        refused = _cli("resume", run_id, "--db", rls.superuser, "--json", code=WRONG_DATABASE_EXIT)
        assert refused["error"]["code"] == "wrong_database"
        assert f"executes as {rls.reader_user}" in refused["error"]["message"]
        _untouched(state, run_id, before)

        done = _cli("resume", run_id, "--db", rls.reader, "--json", code=0)
        assert done["rows_preview"] == rls.rows(rls.reader)

    def test_runs_recover_takes_only_the_runs_of_its_login(
        self, rls: RlsDatabase, harness: Harness, cli_env: str
    ) -> None:
        state = StateDatabase(cli_env)
        run_id = _ask(harness, rls.reader, state)
        _approve(state, run_id)
        paused = state.runs.load(run_id)
        state.runs.transition(  # a process took it after the decision, and stopped
            run_id,
            expected=(paused.status, paused.version),
            status="resuming",
            owner="gone:1",
            lease_s=0.001,
        )
        time.sleep(0.01)
        before = state.runs.load(run_id)

        assert _cli("runs", "recover", "--db", rls.superuser, "--json", code=0) == {
            "recovered": [],
            "failed": [],
        }
        _untouched(state, run_id, before)
        with pytest.raises(WrongDatabase, match=rls.reader_user):
            _pipeline(harness, rls.superuser, state).recover(run_id)

        out = _cli("runs", "recover", "--db", rls.reader, "--json", code=0)
        assert [r["run_id"] for r in out["recovered"]] == [run_id]
        assert _finished_rows(state, run_id) == rls.rows(rls.reader)

    def test_a_worker_logged_in_as_another_user_leaves_the_run_alone(
        self, rls: RlsDatabase, harness: Harness, cli_env: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        state = StateDatabase(cli_env)
        run_id = _ask(harness, rls.reader, state)
        assert "***" in state.runs.load(run_id).database  # the worker's SQLGATE_DB is used
        _approve(state, run_id)
        before = state.runs.load(run_id)
        task = SimpleNamespace(retry=None)

        monkeypatch.setenv("SQLGATE_DB", rls.superuser)
        monkeypatch.setattr(orchestrator.interfaces.tasks, "_worker", None)
        assert orchestrator.interfaces.tasks.advance_run(task, run_id) == "another database's run"
        _untouched(state, run_id, before)

        monkeypatch.setenv("SQLGATE_DB", rls.reader)
        monkeypatch.setattr(orchestrator.interfaces.tasks, "_worker", None)
        assert orchestrator.interfaces.tasks.advance_run(task, run_id) == "resumed"
        assert _finished_rows(state, run_id) == rls.rows(rls.reader)


def _service(harness: Harness, url: str, state: StateDatabase) -> RunService:
    return RunService(
        state.server, state.approvals, state.runs, _pipeline(harness, url, state), workers=1
    )


def _settled(service: RunService) -> None:
    service._pool.shutdown(wait=True)
    service.pipeline.db.dispose()


class TestTheServersRecoverTheirOwnLoginsRuns:
    def test_serve_resumes_a_run_decided_while_it_was_down_only_with_its_login(
        self, rls: RlsDatabase, harness: Harness, state_url: str
    ) -> None:
        state = StateDatabase(state_url)
        state.setup()
        asked = _service(harness, rls.reader, state)
        run_id = asked.submit([PURPOSE], "ann", statements=[SQL])
        _settled(asked)  # the server stops with the run at the gate
        assert state.server.run(run_id).status == "awaiting_approval"
        _approve(state, run_id)  # decided while no server listened
        before = state.runs.load(run_id)

        other = _service(harness, rls.superuser, state)  # a server of the superuser comes up
        other.recover()
        _settled(other)
        _untouched(state, run_id, before)
        assert state.server.run(run_id).status == "awaiting_approval"

        own = _service(harness, rls.reader, state)  # the reader's server comes back
        assert run_id in own.recover()
        _settled(own)
        row = state.server.run(run_id)
        assert row.status == "finished"
        assert RunResult.model_validate(row.results[0]).rows_preview == rls.rows(rls.reader)

    def test_sqlgate_mcp_recovers_too_and_wait_for_run_says_what_happened(
        self,
        rls: RlsDatabase,
        model_endpoint: tuple[str, str],
        state_url: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        state = StateDatabase(state_url)

        def config(url: str) -> McpConfig:
            return McpConfig(
                database_url=url,
                state_url=state_url,
                llm=LLMSettings(model=model_endpoint[1], base_url=model_endpoint[0]),
                workers=1,
                poll_interval=0.05,
                actor="ann",
            )

        async def scenario() -> None:
            asked = McpService(config(rls.reader))
            run_id, _ = await asked.submit([PURPOSE], "ann", statements=[SQL])
            row = await asked.watch(run_id, until=frozenset({"awaiting_approval"}), timeout_s=20)
            assert row.status == "awaiting_approval"
            await asked.stop()
            _approve(state, run_id)  # decided while the server was down
            before = state.runs.load(run_id)

            other = McpService(config(rls.superuser))
            await other.start()
            row = await other.watch(run_id, until=frozenset({"finished"}), timeout_s=1.0)
            report = other.report(row)
            await other.stop()
            assert row.status == "awaiting_approval"
            assert report.error is not None and report.error.code == "awaiting_execution"
            assert f"logs in as {rls.reader_user}" in report.error.message
            assert report.runs_as == rls.reader_user
            _untouched(state, run_id, before)

            back = McpService(config(rls.reader))
            await back.start()
            row = await back.watch(run_id, until=frozenset({"finished", "failed"}), timeout_s=20)
            report = back.report(row)
            await back.stop()
            assert row.status == "finished", row.error
            assert report.questions[0].rows == rls.rows(rls.reader)

        asyncio.run(scenario())


class TestAskersMappedToDatabaseRoles:
    """The same approved statement, two askers whose roles map to two database roles."""

    def _policy(self, rls: RlsDatabase) -> Policy:
        return Policy.model_validate(
            {
                "roles": {
                    "north_team": {"database_role": rls.north},
                    "south_team": {"database_role": rls.south},
                }
            }
        )

    def test_each_asker_gets_their_roles_rows_and_another_role_cannot_resume(
        self, rls: RlsDatabase, harness: Harness, state_url: str
    ) -> None:
        state = StateDatabase(state_url)
        policy = self._policy(rls)
        north = _ask(harness, rls.reader, state, policy=policy, role="north_team")
        south = _ask(harness, rls.reader, state, policy=policy, role="south_team")
        assert state.runs.load(north).login == DatabaseLogin(rls.reader_user, rls.north)
        [record] = state.approvals.pending_batches(run_id=south)
        assert record.batch.context["login"] == f"{rls.reader_user} as {rls.south}"
        for run_id in (north, south):
            _approve(state, run_id)

        # a process logging in as another user would run them as "<it> as north": left alone
        other = _pipeline(harness, rls.superuser, state, policy)
        before = state.runs.load(north)
        with pytest.raises(WrongDatabase, match=f"{rls.reader_user} as {rls.north}"):
            other.resume(north)
        _untouched(state, north, before)

        # the reader's process runs each as the role the run recorded (its own policy file
        # need not repeat the mapping: the run carries the policy it was asked under)
        bare = _pipeline(harness, rls.reader, state)
        [north_done] = bare.resume(north)
        [south_done] = bare.resume(south)
        assert north_done.rows_preview == rls.rows(rls.reader, rls.north)
        assert south_done.rows_preview == rls.rows(rls.reader, rls.south)
        assert [r[0] for r in north_done.rows_preview] == ["north"]
        # a finished run only reads back its stored results: nothing executes, any login may
        assert other.resume(north)[0].rows_preview == north_done.rows_preview
        assert [r[0] for r in south_done.rows_preview] == ["south"]

    def test_a_role_name_is_refused_on_engines_without_set_role(
        self, tmp_path: Any, demo_db: Any
    ) -> None:
        from orchestrator.core.errors import ConfigurationError

        policy = Policy.model_validate({"roles": {"r": {"database_role": "reader"}}})
        with pytest.raises(ConfigurationError, match="database_url_env"):
            TargetDatabase(f"sqlite:///{demo_db}", policy=policy)


@pytest.fixture
def mysql_roles(mysql_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """A MariaDB/MySQL database whose view shows each login its own region; the URLs of the
    ``north`` and ``south`` logins (passwords: URLs of roles come from the environment)."""
    suffix = uuid.uuid4().hex[:8]
    name = f"sqlgate_test_{suffix}"
    admin = sa.create_engine(mysql_url, isolation_level="AUTOCOMMIT")
    users = {region: f"{region}_{suffix}" for region in ("north", "south")}
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
        conn.exec_driver_sql(f"CREATE TABLE {name}.orders (id INTEGER PRIMARY KEY, region TEXT)")
        conn.exec_driver_sql(
            f"INSERT INTO {name}.orders SELECT seq, IF(MOD(seq, 4) = 0, 'north', 'south') "
            "FROM seq_1_to_100"
        )
        conn.exec_driver_sql(
            f"CREATE SQL SECURITY DEFINER VIEW {name}.my_orders AS SELECT id, region FROM "
            f"{name}.orders WHERE CONCAT(region, '_{suffix}') = SUBSTRING_INDEX(USER(), '@', 1)"
        )
        for user in users.values():
            conn.exec_driver_sql(f"CREATE USER '{user}'@'%%' IDENTIFIED BY 'pw-{suffix}'")
            conn.exec_driver_sql(f"GRANT SELECT ON {name}.my_orders TO '{user}'@'%%'")
    base = sa.make_url(mysql_url).set(database=name)
    urls = {
        region: base.set(username=user, password=f"pw-{suffix}").render_as_string(
            hide_password=False
        )
        for region, user in users.items()
    }
    try:
        yield base.render_as_string(hide_password=False), urls
    finally:
        with admin.connect() as conn:
            for user in users.values():
                conn.exec_driver_sql(f"DROP USER IF EXISTS '{user}'@'%%'")
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        admin.dispose()


class TestMysqlRolesHaveTheirOwnLogins:
    def test_each_role_runs_with_its_own_url_and_a_process_without_it_leaves_the_run(
        self,
        mysql_roles: tuple[str, dict[str, str]],
        harness: Harness,
        state_url: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        root_url, urls = mysql_roles
        sql = "SELECT region, COUNT(*) AS n FROM my_orders GROUP BY region ORDER BY region"
        policy = Policy.model_validate(
            {
                "roles": {
                    "north": {"database_url_env": "SQLGATE_TEST_DB_NORTH"},
                    "south": {"database_url_env": "SQLGATE_TEST_DB_SOUTH"},
                }
            }
        )
        monkeypatch.setenv("SQLGATE_TEST_DB_NORTH", urls["north"])
        monkeypatch.setenv("SQLGATE_TEST_DB_SOUTH", urls["south"])
        state = StateDatabase(state_url)
        runs = {}
        for region in ("north", "south"):
            pipeline = _pipeline(harness, root_url, state, policy)
            [paused] = pipeline.run_batch([PURPOSE], statements=[sql], role=region)
            pipeline.db.dispose()
            assert paused.status == RunStatus.AWAITING_APPROVAL, paused.error
            runs[region] = paused.run_id
            user = sa.make_url(urls[region]).username
            assert state.runs.load(paused.run_id).login == DatabaseLogin(f"{user}@%")
            _approve(state, paused.run_id)

        monkeypatch.delenv("SQLGATE_TEST_DB_NORTH")  # a process without the north login
        without = _pipeline(harness, root_url, state, policy)
        before = state.runs.load(runs["north"])
        with pytest.raises(WrongDatabase, match="SQLGATE_TEST_DB_NORTH"):
            without.resume(runs["north"])
        _untouched(state, runs["north"], before)
        [south] = without.resume(runs["south"])
        assert south.rows_preview == _direct(urls["south"], sql)
        assert [r[0] for r in south.rows_preview] == ["south"]

        monkeypatch.setenv("SQLGATE_TEST_DB_NORTH", urls["north"])
        [north] = _pipeline(harness, root_url, state, policy).resume(runs["north"])
        assert north.rows_preview == _direct(urls["north"], sql)
        assert [r[0] for r in north.rows_preview] == ["north"]


def _direct(url: str, sql: str) -> list[list[Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [list(r) for r in conn.exec_driver_sql(sql)]
    finally:
        engine.dispose()
