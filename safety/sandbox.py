"""Run approved SQLite and DuckDB statements in worker processes whose cost is bounded by the OS.

An embedded engine runs inside the process that calls it, and a time limit checked between
steps does not stop one long step: a huge ``printf`` or ``repeat``, a 300-million-element list,
a backtracking regular expression. So sqlgate never runs approved SQL of an embedded engine in
its own interpreter. A ``QuerySandbox`` keeps a few warm worker processes per database
(``safety.sandbox_worker``, started as fresh interpreters, never forked from a threaded
server), each with its own read-only connection and hard limits:

- address space (``RLIMIT_AS``) and, for SQLite, ``hard_heap_limit``; for DuckDB,
  ``memory_limit`` and ``threads``;
- CPU time (``RLIMIT_CPU``, per statement) and the engine's own deadline;
- wall time: a worker that has not answered ``kill_grace_s`` after the statement timeout is
  killed and replaced, and the caller gets ``StatementTimeout`` at once;
- rows: at most ``row_cap + 1`` fetched, and no more counted bytes than the caller's budget
  (``safety.result_budget``; a cut result is reported like the row cap), at most
  ``max_result_bytes`` sent back.

The calling thread only waits on a socket (the GIL is free), so other requests of the same
process are served while a statement runs, whatever it does.

    StatementTimeout        past the statement timeout (interrupted, or the worker killed)
    ResourceLimitExceeded   out of memory, CPU time, value or result size; worker crashed
    StatementFailed         any other error of the engine (its message)
    ReadOnlySetupError      the worker could not open the database
"""

from __future__ import annotations

import io
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import Engine

from .dialects import dialect_for_url
from .errors import ReadOnlySetupError, ResourceLimitExceeded, StatementFailed, StatementTimeout
from .readonly import ReadOnlySettings, embedded_target

__all__ = ["RESULT_TYPES", "QuerySandbox", "SandboxRows", "planner_sandbox", "sandbox_for"]

# What a worker's reply may hold besides builtins: a reply is unpickled with only these, so a
# worker can hand back values, never code.
RESULT_TYPES = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("datetime", "date"),
        ("datetime", "datetime"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("decimal", "Decimal"),
        ("uuid", "UUID"),
    }
)


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in RESULT_TYPES:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a sandbox reply may not hold {module}.{name}")


def _load_reply(data: bytes) -> Any:
    return _ReplyUnpickler(io.BytesIO(data)).load()


_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)
_START_TIMEOUT_S = 60.0
# What a pickled reply adds to the rows' counted bytes (``result_budget`` counts every value
# with room to spare): the budget a worker fetches within leaves this much of the reply's limit.
_REPLY_OVERHEAD = 64 * 1024


@dataclass(frozen=True)
class SandboxRows:
    """What one statement returned: its columns, at most ``row_cap`` rows, and whether more
    rows existed."""

    columns: list[str]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    cut_by: Literal["rows", "bytes"] | None = None  # what cut a truncated result


class QuerySandbox:
    """A small pool of warm worker processes for one SQLite or DuckDB database.

    Args:
        url: the database URL (``sqlite:///file.db`` or ``duckdb:///file.duckdb``).
        settings: the bounds; ``sandbox_workers`` is the pool size (at least 1 here).
        python: the interpreter that runs the workers.

    Guarantee: ``run`` returns or raises within ``statement_timeout_s + kill_grace_s`` of
    starting the statement (plus the wait for a free worker), and no work of the statement runs
    in the calling process.

    Example:
        >>> import sqlite3, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "shop.db")
        >>> sqlite3.connect(path).execute("create table t(a)").connection.commit()
        >>> with QuerySandbox(f"sqlite:///{path}", ReadOnlySettings(sandbox_workers=1)) as box:
        ...     box.run("select 1 as n union all select 2", row_cap=1)
        SandboxRows(columns=['n'], rows=[(1,)], truncated=True, cut_by='rows')
    """

    def __init__(
        self,
        url: str,
        settings: ReadOnlySettings | None = None,
        *,
        python: str = sys.executable,
    ) -> None:
        self.dialect = dialect_for_url(url)
        if self.dialect not in ("sqlite", "duckdb"):
            raise ReadOnlySetupError(f"the sandbox runs SQLite and DuckDB only, not {self.dialect}")
        self.url = url
        self.settings = settings or ReadOnlySettings()
        self.size = max(1, self.settings.sandbox_workers)
        timeout = self.settings.statement_timeout_s
        self.kill_grace_s = min(2.0, max(0.2, 0.25 * timeout))
        threads = self.settings.duckdb_threads if self.dialect == "duckdb" else 1
        self.cpu_s = timeout * threads + 1.0
        self._python = python
        self._config = pickle.dumps(
            {
                "url": url,
                "dialect": self.dialect,
                "settings": self.settings.model_dump(),
                "worker_memory_bytes": self.settings.worker_memory_bytes,
                "max_result_bytes": self.settings.max_result_bytes,
            }
        )
        self._env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (_PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p
            ),
        }
        self._ready = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self.closed = False
        for _ in range(self.size):
            self._idle.append(self._spawn())

    def run(
        self,
        sql: str,
        row_cap: int,
        *,
        wait_s: float | None = None,
        max_bytes: int | None = None,
    ) -> SandboxRows:
        """Run one statement in a worker; see the module docstring for what it raises.

        ``max_bytes`` is the result's byte budget (``safety.result_budget``): the worker stops
        fetching at the row that would pass it and reports the result cut (``cut_by="bytes"``).
        It is never more than the settings' ``max_result_bytes`` allows a reply to carry.

        When every worker is busy the call waits for one; each statement ahead ends within
        its own bound, so the wait is bounded too. ``wait_s`` caps it
        (``ResourceLimitExceeded`` past it).
        """
        worker = self._checkout(wait_s)
        try:
            if worker.error is not None:
                raise worker.error
            reply_bytes = self.settings.max_result_bytes
            budget = max(1, reply_bytes - min(_REPLY_OVERHEAD, reply_bytes // 4))
            return worker.run(
                sql,
                row_cap,
                self.settings.statement_timeout_s,
                self.cpu_s,
                self.kill_grace_s,
                reply_bytes,
                budget if max_bytes is None else max(1, min(max_bytes, budget)),
            )
        finally:
            self._checkin(worker)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring)."""
        with self._ready:
            return [w.proc.pid for w in self._all if w.proc.poll() is None]

    def close(self) -> None:
        """Stop every worker; a worker busy now is stopped when its statement returns."""
        with self._ready:
            self.closed = True
            idle, self._idle = self._idle, []
            self._ready.notify_all()
        for worker in idle:  # every socket closed first: the workers end side by side
            worker.hang_up()
        for worker in idle:
            worker.stop()

    def __enter__(self) -> QuerySandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def ready_count(self) -> int:
        """Workers idle and ready to run a statement now."""
        with self._ready:
            return sum(1 for w in self._idle if w.ready)

    def _spawn(self) -> _Worker:
        worker = _Worker(self._python, self._config, self._env)
        self._all.add(worker)
        threading.Thread(target=self._warm, args=(worker,), daemon=True).start()
        return worker

    def _warm(self, worker: _Worker) -> None:
        # Callers get only workers that are ready (or known broken), never one still starting.
        try:
            worker.wait_ready(_START_TIMEOUT_S)
        except ReadOnlySetupError as exc:
            worker.error = exc
        with self._ready:
            self._ready.notify_all()

    def _checkout(self, wait_s: float | None) -> _Worker:
        def usable() -> _Worker | None:
            ready = [w for w in self._idle if w.ready]
            broken = [w for w in self._idle if w.error is not None]
            return next(iter(ready or broken), None)

        with self._ready:
            if not self._ready.wait_for(lambda: usable() or self.closed, timeout=wait_s):
                raise ResourceLimitExceeded(
                    f"no sandbox worker of the {self.size} was free for {wait_s:g} s; try again "
                    "when fewer statements are running"
                )
            worker = usable()
            if self.closed or worker is None:
                raise ReadOnlySetupError("the sandbox is closed")
            self._idle.remove(worker)
            return worker

    def _checkin(self, worker: _Worker) -> None:
        if worker.dead or self.closed:
            worker.stop()
            with self._ready:
                self._all.discard(worker)
                if self.closed:
                    return
                worker = self._spawn()  # a fresh interpreter; it warms up in the background
        with self._ready:
            self._idle.append(worker)
            self._ready.notify_all()


class _Worker:
    """One worker process and its end of the socket."""

    def __init__(self, python: str, config: bytes, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            self.proc = subprocess.Popen(
                [python, "-m", "safety.sandbox_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        self.channel = Connection(ours.detach())
        self.channel.send_bytes(config)
        self.ready = False
        self.dead = False
        self.killed = False
        self.error: ReadOnlySetupError | None = None

    def wait_ready(self, timeout_s: float) -> None:
        if self.ready:
            return
        if not self.channel.poll(timeout_s):
            self.kill()
            raise ReadOnlySetupError(f"a sandbox worker did not start within {timeout_s:g} s")
        try:
            kind, detail = _load_reply(self.channel.recv_bytes())
        except (EOFError, OSError):
            self.dead = True
            raise ReadOnlySetupError(
                f"a sandbox worker ended while starting ({self._exit_text()})"
            ) from None
        if kind != "ready":
            self.dead = True
            raise ReadOnlySetupError(f"a sandbox worker could not open the database: {detail}")
        self.ready = True

    def run(
        self,
        sql: str,
        row_cap: int,
        timeout_s: float,
        cpu_s: float,
        grace_s: float,
        max_bytes: int,
        budget: int,
    ) -> SandboxRows:
        try:
            self.channel.send_bytes(pickle.dumps((sql, row_cap, timeout_s, cpu_s, budget)))
            answered = self.channel.poll(timeout_s + grace_s)
        except OSError:
            answered = True  # the worker is gone: recv below says how
        if not answered:
            self.kill()
            raise StatementTimeout(
                f"the statement ran past the {timeout_s:g} s statement timeout; its worker "
                "process was stopped"
            )
        try:
            reply = _load_reply(self.channel.recv_bytes(max_bytes + 4096))
        except (EOFError, OSError):
            self.dead = True
            raise self._death(cpu_s) from None
        except pickle.UnpicklingError as exc:
            self.kill()
            raise StatementFailed(f"the worker's reply was refused: {exc}") from None
        kind = reply[0]
        if kind == "rows":
            return SandboxRows(
                columns=reply[1], rows=reply[2], truncated=reply[3] is not None, cut_by=reply[3]
            )
        message = reply[1]
        if kind == "timeout":  # the engine's own words, as when it runs in-process
            raise StatementTimeout(message)
        if kind == "resource":
            raise ResourceLimitExceeded(f"the statement was stopped for its cost: {message}")
        raise StatementFailed(message)

    def _death(self, cpu_s: float) -> ResourceLimitExceeded:
        code = self._reap()
        if code == -signal.SIGXCPU:
            return ResourceLimitExceeded(
                f"the statement used more than {cpu_s:g} s of CPU time; its worker process was "
                "stopped"
            )
        return ResourceLimitExceeded(
            f"the worker process running the statement ended ({self._exit_text()}); a memory "
            "limit is the usual cause"
        )

    def _reap(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def _exit_text(self) -> str:
        code = self._reap()
        if code is not None and code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit status {code}"

    def kill(self) -> None:
        self.dead = self.killed = True
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.channel.close()

    def hang_up(self) -> None:
        """Close the socket: a ready worker exits on its own; one still starting is killed."""
        if not self.ready and self.proc.poll() is None:
            self.proc.kill()
        if not self.channel.closed:
            self.channel.close()

    def stop(self) -> None:
        """Hang up, and kill the worker if it lingers."""
        self.hang_up()
        try:
            self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.kill()


_POOLS: weakref.WeakKeyDictionary[Engine, QuerySandbox] = weakref.WeakKeyDictionary()
_POOLS_LOCK = threading.Lock()


def sandbox_for(engine: Engine) -> QuerySandbox | None:
    """The sandbox of a SQLite or DuckDB engine made by ``open_readonly_engine``, started on first
    use and stopped when the engine is collected; None for any other engine or when its settings
    ask for ``sandbox_workers=0``."""
    target = embedded_target(engine)
    if target is None or target[1].sandbox_workers == 0:
        return None
    with _POOLS_LOCK:
        pool = _POOLS.get(engine)
        if pool is None or pool.closed:
            pool = QuerySandbox(*target)
            _POOLS[engine] = pool
            weakref.finalize(engine, pool.close)
        return pool


def planner_sandbox(engine: Engine) -> QuerySandbox:
    """The sandbox a SQLite or DuckDB statement's plan is asked in, before anyone approved it.

    The same pool as ``sandbox_for`` when there is one. Planning never runs in the calling
    process, so a pool of one worker is started also when the settings ask for
    ``sandbox_workers=0`` (approved statements then still run in-process, as asked), and for an
    embedded engine not made by ``open_readonly_engine`` (default bounds, its URL). Raises
    ``ReadOnlySetupError`` for any other engine.
    """
    target = embedded_target(engine)
    if target is None:
        url = engine.url.render_as_string(hide_password=False)
        target = (url, ReadOnlySettings())
    elif target[1].sandbox_workers > 0:
        pool = sandbox_for(engine)
        assert pool is not None  # an embedded engine with workers has a pool
        return pool
    with _POOLS_LOCK:
        pool = _PLANNERS.get(engine)
        if pool is None or pool.closed:
            pool = QuerySandbox(target[0], target[1].model_copy(update={"sandbox_workers": 1}))
            _PLANNERS[engine] = pool
            weakref.finalize(engine, pool.close)
        return pool


_PLANNERS: weakref.WeakKeyDictionary[Engine, QuerySandbox] = weakref.WeakKeyDictionary()
