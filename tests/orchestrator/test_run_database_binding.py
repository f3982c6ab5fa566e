"""A run belongs to one database: two databases, one state database, every entry point.

Database B is where the question was asked; database A has the same schema and another file,
so B's approved statement would run on A without complaint. Every path that claims, resumes,
recovers or executes a run must leave B's run alone when it serves A, and B's own process must
still carry it on. Run on a SQLite and on a PostgreSQL state database.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

import orchestrator.interfaces.tasks
from approvals import ApprovalGate, Approve, SqlApprovalStore
from orchestrator.core.checkpoint import StartedCheckpoint
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import WrongDatabase
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.result import WRONG_DATABASE_EXIT, RunStatus
from orchestrator.core.run_identity import DatabaseLogin, check_run_database, database_identity
from orchestrator.core.runs import RunStore
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.cli.main import app
from orchestrator.interfaces.server.events import ServerEvent
from orchestrator.interfaces.server.runner import RunService
from safety import Policy
from tests.orchestrator.conftest import Harness, requests_so_far
from tests.scripted_llm import scenarios as sc

runner = CliRunner()


@pytest.fixture(params=["sqlite-state", "postgres-state"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-state":
        return f"sqlite:///{tmp_path / 'state.sqlite'}"
    return str(request.getfixturevalue("postgres_database"))


@pytest.fixture
def two_databases(demo_db: Path, tmp_path: Path) -> tuple[str, str]:
    """(A, B): two files with the same schema and rows."""
    a, b = tmp_path / "a" / "shop.db", tmp_path / "b" / "shop.db"
    for path in (a, b):
        path.parent.mkdir()
        shutil.copy(demo_db, path)
    return f"sqlite:///{a}", f"sqlite:///{b}"


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, model_endpoint: tuple[str, str], state_url: str):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    monkeypatch.delenv("SQLGATE_DB", raising=False)
    return state_url


def _cli(*args: str, code: int) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if "--json" in args else result.output


def _approve_everything(state_url: str) -> None:
    approvals = SqlApprovalStore(state_url)
    [record] = approvals.pending_batches()
    gate = ApprovalGate(reviewer=None, validate=lambda sql: _Accepted(sql), store=approvals)
    gate.submit(
        record.batch_id, {item.call_id: Approve() for item in record.batch.pending}, actor="alice"
    )


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def _service(harness: Harness, db_url: str, state: StateDatabase) -> RunService:
    pipeline = harness.pipeline(db_url, None, stores=(state.approvals, state.runs))
    return RunService(state.server, state.approvals, state.runs, pipeline, workers=1)


def _drain(service: RunService) -> None:
    service._pool.shutdown(wait=True)


class TestARunIsBoundToItsDatabase:
    @pytest.mark.vcr
    def test_resume_on_another_database_runs_nothing_and_its_own_database_finishes_it(
        self, cli_env: str, two_databases: tuple[str, str], harness: Harness, vcr
    ) -> None:
        a, b = two_databases
        paused = _cli("ask", sc.PRODUCT_COUNT, "--db", b, "--defer", "--json", code=11)
        _approve_everything(cli_env)
        run_id = paused["run_id"]
        state = StateDatabase(cli_env)
        state.setup()
        before = state.runs.load(run_id)
        assert before.target == database_identity(b) != database_identity(a)

        refused = _cli("resume", run_id, "--db", a, "--json", code=WRONG_DATABASE_EXIT)
        assert refused["error"]["code"] == "wrong_database"
        assert database_identity(b) in refused["error"]["message"]

        # the pipeline itself, the server's event handler and `runs recover`, all serving A
        with pytest.raises(WrongDatabase):
            harness.pipeline(a, None, stores=(state.approvals, state.runs)).resume(run_id)
        state.server.create_run(run_id, "analyst", [sc.PRODUCT_COUNT])
        state.server.update_run(run_id, status="awaiting_approval")
        service = _service(harness, a, state)
        service.on_event(ServerEvent("audit", 1, "approval_decided", run_id, None))
        _drain(service)
        assert _cli("runs", "recover", "--db", a, "--json", code=0) == {
            "recovered": [],
            "failed": [],
        }

        after = state.runs.load(run_id)
        assert (after.status, after.version) == (before.status, before.version)
        assert state.approvals.executions(run_id=run_id) == []
        assert state.server.run(run_id).status == "awaiting_approval"
        assert requests_so_far(vcr) == 2  # nothing past the gate was asked of the model

        respelled = b.replace("/b/shop.db", "/b/./shop.db")  # B, spelled another way
        done = _cli("resume", run_id, "--db", respelled, "--json", code=0)
        assert done["status"] == "answered" and done["row_count"] == 8
        assert len(state.approvals.executions(run_id=run_id)) == 1
        # what the review taught is kept under the run's recorded database, not the spelling
        assert [e.database for e in state.memory.examples()] == [b]

    @pytest.mark.vcr  # a model client is built; no request is made (no cassette)
    def test_background_pickers_leave_another_databases_runs_alone(
        self,
        vcr: Any,
        cli_env: str,
        two_databases: tuple[str, str],
        harness: Harness,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        a, b = two_databases
        state = StateDatabase(cli_env)
        state.setup()
        questions = [sc.PRODUCT_COUNT]
        # B's runs: one queued that nobody started, one whose process stopped (lease expired),
        # and one queued on a server database whose password is never stored.
        state.runs.create(
            "run_queued",
            b,
            StartedCheckpoint(run_id="run_queued", questions=questions),
            status="queued",
            login=DatabaseLogin(""),
        )
        state.runs.create(
            "run_stopped",
            b,
            StartedCheckpoint(run_id="run_stopped", questions=questions),
            status="running",
            owner="dead-process",
            lease_s=0.001,
            login=DatabaseLogin(""),
        )
        secret = "postgresql+psycopg://ann:***@db.example/sales"
        state.runs.create(
            "run_server",
            secret,
            StartedCheckpoint(run_id="run_server", questions=questions),
            status="queued",
            login=DatabaseLogin("ann"),
        )
        before = {r["run_id"]: (r["status"], r["owner"]) for r in state.runs.list()}
        pipeline = harness.pipeline(a, None, stores=(state.approvals, state.runs))

        assert pipeline.recover_all() == []
        for run_id in ("run_queued", "run_stopped"):
            with pytest.raises(WrongDatabase):
                pipeline.recover(run_id)
        with pytest.raises(WrongDatabase):  # claiming a queued run (server, MCP, worker start)
            pipeline.run_batch(questions, run_id="run_queued")

        service = _service(harness, a, state)  # `sqlgate serve` and `sqlgate mcp` on A
        state.server.create_run("run_queued", "analyst", questions)
        service.recover()
        service._pool.submit(service._start, "run_queued", questions)
        _drain(service)

        assert _cli("runs", "recover", "--db", a, "--json", code=0) == {
            "recovered": [],
            "failed": [],
        }

        # a worker whose own database is A, handed B's runs (its SQLGATE_DB stands in for a
        # stored URL whose password was dropped)
        monkeypatch.setenv("SQLGATE_DB", a)
        monkeypatch.setattr(orchestrator.interfaces.tasks, "_worker", None)
        task = SimpleNamespace(retry=None)
        assert (
            orchestrator.interfaces.tasks.advance_run(task, "run_server")
            == "another database's run"
        )

        after = {r["run_id"]: (r["status"], r["owner"]) for r in state.runs.list()}
        assert after == before
        assert state.approvals.list_summaries(status=None) == []
        # B's own process still sees its stopped run
        assert [r.run_id for r in state.runs.expired(target=database_identity(b))] == [
            "run_stopped"
        ]

    @pytest.mark.vcr
    def test_a_schema_changed_since_approval_is_validated_again_before_anything_runs(
        self, state_url: str, two_databases: tuple[str, str], harness: Harness, vcr
    ) -> None:
        _, b = two_databases
        state = StateDatabase(state_url)
        stores = (state.approvals, state.runs)
        policy = Policy.model_validate({"tables": {"allow": ["products", "categories"]}})

        def pipeline() -> Pipeline:
            return Pipeline(
                TargetDatabase(b, policy=policy),
                harness.llm(),
                None,
                approval_store=stores[0],
                run_store=stores[1],
            )

        paused = pipeline().ask(sc.PRODUCT_COUNT)
        assert paused.status == RunStatus.AWAITING_APPROVAL
        approved_on = state.runs.load(paused.run_id).schema_fingerprint
        assert approved_on == TargetDatabase(b).schema_fingerprint()
        _approve_everything(state_url)
        with sqlite3.connect(b.removeprefix("sqlite:///")) as conn:
            conn.execute("ALTER TABLE products RENAME TO products_retired")

        [done] = pipeline().resume(paused.run_id)

        assert done.status == RunStatus.UNSAFE and done.error.code == "schema_changed", done.error
        assert "schema changed" in done.error.message
        assert state.approvals.executions(run_id=paused.run_id) == []
        assert requests_so_far(vcr) == 2


class TestDatabaseIdentity:
    @pytest.mark.parametrize(
        ("one", "other"),
        [
            ("postgresql+psycopg://ann:x@DB:5432/sales", "postgresql://bob@db/sales"),
            (
                "mysql+pymysql://root@127.0.0.1/shop",
                "mariadb://u:p@127.0.0.1:3306/shop?charset=utf8",
            ),
            ("sqlite:///{tmp}/shop.db", "sqlite:///{tmp}/./x/../shop.db"),
        ],
    )
    def test_spellings_of_one_database_agree(self, one: str, other: str, tmp_path: Path) -> None:
        (tmp_path / "x").mkdir()
        assert database_identity(one.format(tmp=tmp_path)) == database_identity(
            other.format(tmp=tmp_path)
        )

    @pytest.mark.parametrize(
        ("one", "other"),
        [
            ("sqlite:///{tmp}/shop.db", "sqlite:///{tmp}/shop.db.bak"),
            ("postgresql://h/sales", "postgresql://h/sales_archive"),
            ("postgresql://h/sales", "postgresql://h:5433/sales"),
            ("postgresql://h/sales", "mysql://h/sales"),
            ("duckdb:///{tmp}/w.duckdb", "sqlite:///{tmp}/w.duckdb"),
        ],
    )
    def test_two_databases_never_agree(self, one: str, other: str, tmp_path: Path) -> None:
        assert database_identity(one.format(tmp=tmp_path)) != database_identity(
            other.format(tmp=tmp_path)
        )

    def test_a_run_without_a_recorded_database_is_refused(self) -> None:
        with pytest.raises(WrongDatabase, match="unrecorded"):
            check_run_database("run_x", None, "sqlite:///a.db")

    def test_runs_recorded_before_the_binding_get_their_urls_identity(self, tmp_path: Path) -> None:
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
        store = RunStore(url)
        store.create(
            "run_old",
            "sqlite:///shop.db",
            StartedCheckpoint(run_id="run_old", questions=["q"]),
            login=DatabaseLogin(""),
        )
        import sqlalchemy as sa

        with store.engine.begin() as conn:  # as a version-4 database left it
            conn.execute(sa.text("ALTER TABLE sqlgate_runs DROP COLUMN login_user"))
            conn.execute(sa.text("ALTER TABLE sqlgate_runs DROP COLUMN login_role"))
            conn.execute(sa.text("UPDATE sqlgate_runs SET target = NULL"))
            conn.execute(sa.text("UPDATE sqlgate_schema SET version = 4 WHERE component = 'runs'"))
            conn.execute(sa.text("ALTER TABLE sqlgate_runs DROP COLUMN schema_fingerprint"))
            conn.execute(sa.text("DROP INDEX ix_sqlgate_runs_target"))
            conn.execute(sa.text("ALTER TABLE sqlgate_runs DROP COLUMN target"))
        RunStore(url).setup()
        assert RunStore(url).load("run_old").target == database_identity("sqlite:///shop.db")
        assert RunStore(url).load("run_old").login == DatabaseLogin("")
