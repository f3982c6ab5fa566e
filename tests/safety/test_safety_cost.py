"""A query's cost is bounded: SQLite and DuckDB statements run in sandbox workers under OS limits.

The denial-of-service statements below ran for tens of seconds and took gigabytes in the
serving process before the sandbox. Each must now end within twice the statement timeout,
inside a worker whose memory is capped, while a second thread of this process keeps getting
answers (``SELECT 1`` through the same executor, and a plain Python heartbeat) within 200 ms.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agents.errors import ExecutionError
from agents.sql_executor import SQLExecutor
from safety import (
    QuerySandbox,
    ReadOnlySettings,
    ReadOnlySetupError,
    ResourceLimitExceeded,
    StatementFailed,
    StatementTimeout,
    open_readonly_engine,
    sandbox_for,
)
from safety.statement import (
    _minted as unchecked,  # the database's own walls, tested apart from the validator
)

TIMEOUT_S = 1.0
WORKER_MEMORY = 512 * 1024 * 1024
SETTINGS = ReadOnlySettings(
    statement_timeout_s=TIMEOUT_S,
    worker_memory_bytes=WORKER_MEMORY,
    sandbox_workers=2,
    max_value_bytes=16 * 1024 * 1024,
    duckdb_threads=1,  # leaves a CPU of a small machine to the second request
)
# RSS a worker may reach: what its engine mapped at start (DuckDB ~0.8 GB of address space,
# mostly unbacked) plus WORKER_MEMORY; unbounded, these statements reached 2-15 GB.
MAX_WORKER_RSS = 1536 * 1024 * 1024
MAX_PING_S = 0.2

ATTACKS = {
    "sqlite": [
        pytest.param(
            "SELECT ('a' || printf('%.*c', 200000, 'a') || 'b') REGEXP '(a+)+$'",
            id="backtracking-regexp",
        ),
        pytest.param("SELECT printf('%.*c', 2000000000, 'x')", id="huge-printf"),
        pytest.param(
            "SELECT length(replace(printf('%.*c', 1000000, 'x'), 'x', printf('%.*c', 2000, 'y')))",
            id="huge-replace",
        ),
        pytest.param(
            "WITH RECURSIVE r(i, s) AS (SELECT 1, 'x' UNION ALL SELECT i + 1, s || s FROM r"
            " WHERE i < 40) SELECT max(length(s)) FROM r",
            id="doubling-string",
        ),
        pytest.param(
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r",
            id="endless-recursion",
        ),
    ],
    "duckdb": [
        pytest.param(
            "SELECT regexp_matches(repeat('a', 200000) || 'b', '(a+)+$')", id="backtracking-regexp"
        ),
        pytest.param("SELECT length(repeat('x', 2000000000))", id="huge-repeat"),
        pytest.param("SELECT list_sum(range(300000000))", id="huge-list"),
        pytest.param(
            "SELECT sum(x.range * y.range) FROM range(100000000) AS x, range(100000000) AS y",
            id="cross-join",
        ),
        pytest.param("SELECT count(*) FROM range(10000000000)", id="long-scan"),
    ],
}


def _make_database(dialect: str, folder: Path) -> str:
    if dialect == "sqlite":
        path = folder / "t.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE t (a INTEGER)")
            conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(10)])
        return f"sqlite:///{path}"
    import duckdb

    path = folder / "t.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE t AS SELECT range AS a FROM range(10)")
    conn.close()
    return f"duckdb:///{path}"


@dataclass
class Watch:
    """A second request of this process, and the sandbox workers' memory, sampled throughout."""

    executor: SQLExecutor
    box: QuerySandbox
    worst_ping_s: float = 0.0
    worst_heartbeat_s: float = 0.0
    peak_rss: int = 0
    pings: int = 0
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def loop(self) -> None:
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                assert self.executor.run(
                    unchecked("SELECT 1", self.executor.dialect, None)
                ).rows == [[1]]
                self.worst_ping_s = max(self.worst_ping_s, time.monotonic() - started)
                self.pings += 1
                started = time.monotonic()
                time.sleep(0.01)
                self.worst_heartbeat_s = max(self.worst_heartbeat_s, time.monotonic() - started)
                for pid in self.box.pids:
                    self.peak_rss = max(self.peak_rss, _rss(pid))
        except BaseException as exc:
            self.errors.append(exc)


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@pytest.fixture(scope="module")
def executors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SQLExecutor]]:
    """One read-only engine, sandbox and executor per embedded dialect, for the whole module."""
    made: dict[str, SQLExecutor] = {}
    for dialect in ("sqlite", "duckdb"):
        url = _make_database(dialect, tmp_path_factory.mktemp(dialect))
        engine = open_readonly_engine(url, SETTINGS)
        made[dialect] = SQLExecutor(engine, row_cap=5)
        assert made[dialect].sandbox is sandbox_for(engine) is not None
    yield made
    for executor in made.values():
        assert executor.sandbox is not None
        executor.sandbox.close()
        executor.engine.dispose()


@pytest.fixture
def target(request: pytest.FixtureRequest, executors: dict[str, SQLExecutor]) -> SQLExecutor:
    executor = executors[request.param]
    assert executor.sandbox is not None
    _wait_warm(executor.sandbox)
    return executor


BOTH = pytest.mark.parametrize("target", ["sqlite", "duckdb"], indirect=True)


def _wait_warm(box: QuerySandbox) -> None:
    deadline = time.monotonic() + 60
    while box.ready_count < box.size and time.monotonic() < deadline:
        time.sleep(0.05)
    assert box.ready_count == box.size


def _attack(executor: SQLExecutor, sql: str) -> None:
    box = executor.sandbox
    assert box is not None
    watch = Watch(executor, box)
    pinger = threading.Thread(target=watch.loop, daemon=True)
    pinger.start()
    time.sleep(0.1)
    started = time.monotonic()
    outcome: ExecutionError | None = None
    try:
        executor.run(unchecked(sql, executor.dialect, None))
    except ExecutionError as exc:
        outcome = exc
    elapsed = time.monotonic() - started
    time.sleep(0.1)
    watch.stop.set()
    pinger.join(10)
    assert not watch.errors, watch.errors
    assert elapsed < 2 * TIMEOUT_S, f"{sql} ran {elapsed:.2f} s"
    if outcome is not None:
        assert outcome.code in ("statement_timeout", "resource_limit"), outcome
        assert outcome.timed_out is True
        assert outcome.message
    assert watch.pings >= 5
    assert watch.worst_ping_s < MAX_PING_S, f"SELECT 1 waited {watch.worst_ping_s:.3f} s"
    assert watch.worst_heartbeat_s < MAX_PING_S
    assert 0 < watch.peak_rss < MAX_WORKER_RSS, f"worker RSS reached {watch.peak_rss} bytes"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "sql"),
    [
        pytest.param(dialect, case.values[0], id=f"{dialect}-{case.id}")
        for dialect, cases in ATTACKS.items()
        for case in cases
    ],
    indirect=["target"],
)
def test_attack_ends_in_time_with_bounded_memory_while_the_process_answers(
    target: SQLExecutor, sql: str
) -> None:
    _attack(target, sql)


@BOTH
def test_a_stopped_worker_is_replaced_and_the_next_statement_runs(target: SQLExecutor) -> None:
    executor = target
    box = executor.sandbox
    assert box is not None
    before = set(box.pids)
    slow = (
        "SELECT sum(x.range * y.range) FROM range(100000000) AS x, range(100000000) AS y"
        if executor.dialect == "duckdb"
        else "SELECT printf('%.*c', 2000000000, 'x')"
    )
    with pytest.raises(ExecutionError) as info:
        executor.run(unchecked(slow, executor.dialect, None))
    assert info.value.code in ("statement_timeout", "resource_limit")
    assert executor.run(unchecked("SELECT count(*) FROM t", executor.dialect, None)).rows == [[10]]
    _wait_warm(box)
    assert len(box.pids) == box.size
    if info.value.code == "statement_timeout" and "stopped" in info.value.message:
        assert set(box.pids) != before


@BOTH
def test_sandbox_rows_are_capped_exactly(target: SQLExecutor) -> None:
    executor = target
    box = executor.sandbox
    assert box is not None
    assert box.run("SELECT a FROM t ORDER BY a", row_cap=10).truncated is False
    capped = box.run("SELECT a FROM t ORDER BY a", row_cap=9)
    assert capped.truncated is True
    assert capped.rows == [(i,) for i in range(9)]
    empty = box.run("SELECT a FROM t WHERE a < 0", row_cap=3)
    assert (empty.columns, empty.rows, empty.truncated) == (["a"], [], False)


@BOTH
def test_sandbox_errors_keep_the_engines_message(target: SQLExecutor) -> None:
    executor = target
    box = executor.sandbox
    assert box is not None
    with pytest.raises(StatementFailed) as info:
        box.run("SELECT nosuch FROM t", row_cap=1)
    assert "nosuch" in info.value.message
    with pytest.raises(StatementFailed):
        box.run("DELETE FROM t", row_cap=1)
    assert box.run("SELECT count(*) FROM t", row_cap=1).rows == [(10,)]


def test_sandbox_cuts_a_result_at_its_byte_bound(tmp_path: Path) -> None:
    url = _make_database("sqlite", tmp_path)
    settings = SETTINGS.model_copy(update={"max_result_bytes": 4096, "sandbox_workers": 1})
    with QuerySandbox(url, settings) as box:
        cut = box.run("SELECT printf('%.*c', 1000, 'x') FROM t", row_cap=10)
        small = box.run("SELECT printf('%.*c', 1000, 'x') FROM t", row_cap=10, max_bytes=2500)
    assert cut.truncated and cut.cut_by == "bytes"
    assert 1 <= len(cut.rows) <= 3  # 1,008+ counted bytes a row, within 4,096 less the overhead
    assert small.cut_by == "bytes" and len(small.rows) == 2


def test_sandbox_reports_a_database_it_cannot_open(tmp_path: Path) -> None:
    with QuerySandbox(f"sqlite:///{tmp_path / 'missing.db'}", SETTINGS) as box:
        with pytest.raises(ReadOnlySetupError) as info:
            box.run("SELECT 1", row_cap=1)
    assert "could not open the database" in info.value.message


def test_sandbox_cpu_limit_ends_the_worker_with_a_resource_error(tmp_path: Path) -> None:
    # The engine's deadline is far away; the CPU-time limit (one second of CPU) is what stops it.
    url = _make_database("sqlite", tmp_path)
    settings = SETTINGS.model_copy(update={"statement_timeout_s": 30.0, "sandbox_workers": 1})
    with QuerySandbox(url, settings) as box:
        box.run("SELECT 1", row_cap=1)  # started and warm: the CPU spent from here is the query's
        box.cpu_s = 1.0
        with pytest.raises(ResourceLimitExceeded) as info:  # not StatementTimeout, 30 s away
            box.run(
                "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
                "SELECT max(i) FROM r",
                row_cap=1,
            )
    assert "more than 1 s of CPU time" in info.value.message


def test_a_step_that_ignores_the_deadline_is_killed_at_it(tmp_path: Path) -> None:
    url = _make_database("sqlite", tmp_path)  # one printf step does not check the deadline
    with QuerySandbox(url, SETTINGS.model_copy(update={"sandbox_workers": 1})) as box:
        with pytest.raises(StatementTimeout) as info:
            box.run("SELECT printf('%.*c', 2000000000, 'x')", row_cap=1)
    assert info.value.message.endswith("its worker process was stopped")


def test_engines_without_a_sandbox(tmp_path: Path) -> None:
    url = _make_database("sqlite", tmp_path)
    in_process = open_readonly_engine(url, SETTINGS.model_copy(update={"sandbox_workers": 0}))
    assert sandbox_for(in_process) is None
    assert SQLExecutor(in_process).run(
        unchecked("SELECT count(*) FROM t", "sqlite", None)
    ).rows == [[10]]
    with pytest.raises(ReadOnlySetupError):
        QuerySandbox("postgresql+psycopg://u@127.0.0.1/db")


def test_a_busy_sandbox_makes_callers_wait_not_fail(tmp_path: Path) -> None:
    url = _make_database("sqlite", tmp_path)
    with QuerySandbox(url, SETTINGS.model_copy(update={"sandbox_workers": 1})) as box:
        box.run("SELECT 1", row_cap=1)
        slow = (
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r"
        )
        busy = threading.Thread(target=lambda: pytest.raises(StatementTimeout, box.run, slow, 1))
        busy.start()
        time.sleep(0.2)
        with pytest.raises(ResourceLimitExceeded) as info:
            box.run("SELECT 1", row_cap=1, wait_s=0.1)
        assert "no sandbox worker of the 1 was free" in info.value.message
        started = time.monotonic()
        assert box.run("SELECT count(*) FROM t", row_cap=1).rows == [(10,)]  # waits its turn
        assert 0.3 < time.monotonic() - started < 2 * TIMEOUT_S
        busy.join()


def test_a_reply_holds_values_never_code() -> None:
    import pickle

    from safety.sandbox import _load_reply

    class Gadget:
        def __reduce__(self):  # what a hostile reply would carry: a call on unpickling
            return (print, ("ran",))

    assert _load_reply(pickle.dumps(("rows", ["a"], [(1, "x")], False))) == (
        "rows",
        ["a"],
        [(1, "x")],
        False,
    )
    with pytest.raises(pickle.UnpicklingError):
        _load_reply(pickle.dumps(Gadget()))
