"""Patience with the state database: operations cut off by a lost connection are tried again
(with a fake clock and sleep), a write whose commit went through before its answer was lost is
recognised rather than applied twice or refused, and patience runs out in one sentence."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from approvals import SqlApprovalStore
from approvals.ledger import ExecutionLedger
from approvals.models import ExecutionRecord
from orchestrator.core.checkpoint import StartedCheckpoint
from orchestrator.core.errors import ConfigurationError, RunConflict, StateDatabaseError
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.runs import RunStore
from orchestrator.core.state_db import StateDatabase
from orchestrator.core.state_patience import StatePatience, connection_lost, patience_from_env

LOST = "server closed the connection unexpectedly"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def _patience(clock: FakeClock, seconds: float = 60.0) -> StatePatience:
    return StatePatience(seconds, sleep=clock.sleep, clock=clock, jitter=lambda: 0.5)


def _lost() -> sa.exc.OperationalError:
    return sa.exc.OperationalError("SELECT 1", {}, sqlite3.OperationalError(LOST))


def test_a_lost_connection_is_tried_again_with_growing_jittered_waits() -> None:
    clock = FakeClock()
    failures = iter([_lost()] * 7)

    def operation() -> str:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return "done"

    assert _patience(clock).call(operation, "the state database x") == "done"
    # 0.2 s doubling up to 5 s, each times 1.5 (the jitter)
    assert clock.waits == [0.3, 0.6, 1.2, 2.4, 4.8, 7.5, 7.5]


def test_patience_runs_out_in_one_sentence() -> None:
    clock = FakeClock()

    def operation() -> None:
        raise _lost()

    with pytest.raises(StateDatabaseError) as caught:
        _patience(clock, 10.0).call(operation, "the state database postgresql://h/state")
    message = caught.value.message
    assert message.startswith("the state database postgresql://h/state cannot be reached (tried")
    assert "for 10 s, SQLGATE_STATE_PATIENCE=10" in message and LOST in message
    assert "\n" not in message
    assert 10.0 <= clock.now < 20.0


def test_errors_of_the_statement_itself_are_not_retried() -> None:
    clock = FakeClock()
    calls = []

    def operation() -> None:
        calls.append(1)
        raise sa.exc.IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE failed"))

    with pytest.raises(sa.exc.IntegrityError):
        _patience(clock).call(operation, "the state database")
    assert calls == [1] and clock.waits == []


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (sa.exc.OperationalError("x", {}, sqlite3.OperationalError("database is locked")), True),
        (sa.exc.OperationalError("x", {}, sqlite3.OperationalError("no such table: t")), False),
        (sa.exc.ProgrammingError("x", {}, Exception("syntax error")), False),
        (
            sa.exc.DBAPIError("x", {}, Exception("whatever"), connection_invalidated=True),
            True,
        ),
        (ValueError("server closed the connection"), False),
    ],
)
def test_what_counts_as_a_lost_connection(error: Exception, lost: bool) -> None:
    assert connection_lost(error) is lost


def test_psycopg_admin_shutdown_is_a_lost_connection() -> None:
    errors = pytest.importorskip("psycopg.errors")
    wrapped = sa.exc.OperationalError("x", {}, errors.AdminShutdown("terminating connection"))
    assert connection_lost(wrapped)


@pytest.mark.parametrize("text", ["-1", "soon", "nan"])
def test_a_bad_patience_setting_is_one_sentence(text: str) -> None:
    with pytest.raises(ConfigurationError, match="SQLGATE_STATE_PATIENCE"):
        patience_from_env({"SQLGATE_STATE_PATIENCE": text})
    assert patience_from_env({}) == 60.0 and patience_from_env({"SQLGATE_STATE_PATIENCE": "0"}) == 0


class _CommitThenLose:
    """A DBAPI connection whose armed commits go through and then report a lost connection
    (the server went away before its answer arrived)."""

    def __init__(self, real: sqlite3.Connection, armed: list[bool]) -> None:
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_armed", armed)

    def commit(self) -> None:
        self._real.commit()
        if self._armed and self._armed.pop():
            raise sqlite3.OperationalError(LOST)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)


@pytest.fixture
def flaky_engine(tmp_path: Path) -> Iterator[tuple[sa.Engine, list[bool]]]:
    path = tmp_path / "state.sqlite"
    armed: list[bool] = []
    engine = sa.create_engine(
        "sqlite://",
        creator=lambda: _CommitThenLose(sqlite3.connect(path, check_same_thread=False), armed),
    )
    yield engine, armed
    engine.dispose()


def test_a_run_write_whose_answer_was_lost_is_recognised_not_refused(
    flaky_engine: tuple[sa.Engine, list[bool]],
) -> None:
    engine, armed = flaky_engine
    clock = FakeClock()
    store = RunStore(engine)
    _patience(clock).guard(store, "the state database")
    checkpoint = StartedCheckpoint(run_id="r1", questions=["how many?"])

    armed.append(True)
    store.create("r1", "sqlite:///t.db", checkpoint, status="queued", login=DatabaseLogin(""))
    armed.append(True)
    version = store.transition(
        "r1", expected=("queued", 1), status="running", owner="me", lease_s=30
    )

    stored = store.load("r1")
    assert (stored.status, stored.version, stored.owner, version) == ("running", 2, "me", 2)
    assert len(clock.waits) == 2  # each write was tried twice
    # Another process's change is still a conflict, also when tried again.
    armed.append(True)
    with pytest.raises(RunConflict):
        store.transition("r1", expected=("queued", 1), status="running", owner="you", lease_s=30)
    with pytest.raises(RunConflict):
        store.create(
            "r1",
            "sqlite:///t.db",
            StartedCheckpoint(run_id="r1", questions=["other"]),
            login=DatabaseLogin(""),
        )


def test_a_ledger_claim_whose_answer_was_lost_is_still_this_claim(
    flaky_engine: tuple[sa.Engine, list[bool]],
) -> None:
    engine, armed = flaky_engine
    clock = FakeClock()
    store = SqlApprovalStore(engine, notify=False)
    _patience(clock).guard(store, "the state database")
    store.setup()
    claim = ExecutionRecord(
        call_id="c1",
        batch_id="b1",
        run_id="r1",
        sql_hash="h",
        state="claimed",
        actor="sqlgate-executor",
        started_at=datetime(2026, 11, 28, 12, 0, 0, 123456, tzinfo=UTC),
        claim="token-1",
    )
    armed.append(True)
    assert store.claim_execution(claim) is True
    # The same claim again, not after a lost connection, is refused: only a retry may
    # recognise its own row.
    assert store.claim_execution(claim) is False
    # Another claim of the same call (another process, its own token) is refused, and so is
    # its settlement: the row carries another token.
    other = claim.model_copy(update={"claim": "token-2"})
    assert store.claim_execution(other) is False
    # Sent and settled, each answer lost once: each update is recognised as its own.
    sent = claim.model_copy(update={"state": "sent", "sent_at": claim.started_at})
    armed.append(True)
    assert store.settle_execution(sent, from_state="claimed") is True
    done = sent.model_copy(update={"state": "done", "finished_at": claim.started_at})
    assert store.settle_execution(other.model_copy(update={"state": "done"})) is False
    armed.append(True)
    assert store.settle_execution(done, from_state="sent") is True
    assert store.execution("c1") == done
    # Recovery after it settled changes nothing.
    assert ExecutionLedger(store).recover(run_id="r1") == []
    assert len(store.executions(run_id="r1")) == 1


def test_a_release_whose_answer_was_lost_is_still_done(
    flaky_engine: tuple[sa.Engine, list[bool]],
) -> None:
    engine, armed = flaky_engine
    clock = FakeClock()
    store = SqlApprovalStore(engine, notify=False)
    _patience(clock).guard(store, "the state database")
    store.setup()
    claim = ExecutionRecord(
        call_id="c1",
        batch_id="b1",
        run_id="r1",
        sql_hash="h",
        state="claimed",
        actor="sqlgate-executor",
        started_at=datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC),
        claim="token-1",
    )
    assert store.claim_execution(claim) is True
    armed.append(True)
    assert store.release_execution(claim) is True
    assert store.execution("c1") is None and len(clock.waits) == 1


def test_every_store_of_the_state_database_is_patient(tmp_path: Path) -> None:
    clock = FakeClock()
    state = StateDatabase(f"sqlite:///{tmp_path / 's.sqlite'}", patience=_patience(clock))
    state.setup()
    for store in (state.runs, state.approvals, state.batches, state.server, state.memory):
        assert getattr(store.setup, "__wrapped__", None) is not None, type(store).__name__
    state.close()


def test_the_result_rows_a_pipeline_keeps_beside_its_runs_are_patient_too(
    flaky_engine: tuple[sa.Engine, list[bool]],
) -> None:
    """A worker's pipeline keeps full results on its run store's engine: a lost connection while
    it saves them (a state database restart just after a statement ran) is tried again, not a
    failed task whose run is then taken over with its statements already run."""
    from orchestrator.core.pipeline import Pipeline

    engine, armed = flaky_engine
    clock = FakeClock()
    patience = _patience(clock)
    runs, approvals = RunStore(engine), SqlApprovalStore(engine, notify=False)
    patience.guard(runs, "the state database")
    patience.guard(approvals, "the state database")
    # No database and no model: only the stores are used here.
    pipeline = Pipeline(None, None, None, approval_store=approvals, run_store=runs)  # type: ignore[arg-type]
    assert pipeline.result_rows is not None
    pipeline.result_rows.setup()

    armed.append(True)
    pipeline.result_rows.save("r1", "q1", ["n"], [[1], [2]], truncated=False, row_cap=10)

    assert len(clock.waits) == 1  # tried again once
    assert list(pipeline.result_rows.rows("r1", "q1")) == [[1], [2]]


def test_a_worker_task_that_meets_a_lost_connection_is_tried_again_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost connection outside every store's patience (the stores give up with one sentence;
    this is what a store without patience raises) sends the task back to the broker rather than
    failing it; any other error still fails it."""
    from types import SimpleNamespace

    from orchestrator.interfaces import tasks

    class Retry(Exception):
        pass

    retried: list[tuple[float, object]] = []

    def retry(*, countdown: float, max_retries: object) -> Retry:
        retried.append((countdown, max_retries))
        return Retry()

    def worker_raising(error: BaseException) -> SimpleNamespace:
        def load(run_id: str) -> None:
            raise error

        return SimpleNamespace(state=SimpleNamespace(runs=SimpleNamespace(load=load)))

    lost = sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    monkeypatch.setattr(tasks, "_worker", worker_raising(lost))
    with pytest.raises(Retry):
        tasks.advance_run(SimpleNamespace(retry=retry), "run_1")
    assert retried == [(tasks.STATE_RETRY_S, None)]

    monkeypatch.setattr(tasks, "_worker", worker_raising(ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        tasks.advance_run(SimpleNamespace(retry=retry), "run_1")
    assert len(retried) == 1
