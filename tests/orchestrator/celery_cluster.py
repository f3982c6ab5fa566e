"""A real Celery cluster for tests and benchmarks: ``sqlgate worker`` processes, a Redis broker,
a PostgreSQL state database, the scripted model server answering after a fixed latency."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from approvals import ApprovalGate, Approve
from orchestrator.core.checkpoint import StartedCheckpoint
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.runs import login_of_url
from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.tasks import QUEUE, enqueue
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedReply

ROOT = Path(__file__).resolve().parents[2]


class TimedScript:
    """The scenario replies after ``latency_s``; remembers when each request arrived."""

    def __init__(self, latency_s: float, scenarios: dict[str, Any] | None = None) -> None:
        self.script = ScenarioScript(SCENARIOS if scenarios is None else scenarios)
        self.latency_s = latency_s
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            self.arrivals.append(time.monotonic())
        return dataclasses.replace(self.script(request), delay_s=self.latency_s)


def purge_broker(broker_url: str) -> None:
    """Drop every task left on the broker by an earlier test (Redis or RabbitMQ)."""
    if broker_url.startswith("redis"):
        redis.Redis.from_url(broker_url).delete(QUEUE, "unacked", "unacked_index")
        return
    from orchestrator.interfaces.tasks import celery_app

    app = celery_app(broker_url)
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        channel.queue_declare(QUEUE, durable=True, auto_delete=False)
        channel.queue_purge(QUEUE)


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


class Cluster:
    """Workers on one broker and one state database; runs queued and approved from here."""

    def __init__(
        self,
        *,
        broker_url: str,
        state_url: str,
        database_url: str,
        model_url: str,
        rate_limit: str = "1000/60",
        rate_backend: str = "memory",
        lease_s: float = 2.0,
        visibility_s: float = 5.0,
    ) -> None:
        self.broker_url = broker_url
        self.state = StateDatabase(state_url)
        self.state.setup()
        self.database_url = database_url
        self.env = {
            **os.environ,
            "SQLGATE_BROKER_URL": broker_url,
            "SQLGATE_STATE_URL": state_url,
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "scripted",
            "SQLGATE_MODEL": "sqlgate-scripted",
            "SQLGATE_RATE_LIMIT": rate_limit,
            "SQLGATE_RATE_BACKEND": rate_backend,
            "SQLGATE_LEASE": str(lease_s),
            "SQLGATE_BROKER_VISIBILITY": str(visibility_s),
        }
        self.workers: list[subprocess.Popen[bytes]] = []
        purge_broker(broker_url)

    def start_workers(
        self,
        count: int,
        *,
        concurrency: int = 2,
        log_dir: Path | None = None,
        names: list[str] | None = None,
    ) -> None:
        """Start ``count`` worker processes (each named by ``sqlgate worker`` itself, unless
        ``names`` are given); with ``log_dir`` each logs (INFO) to a file there."""
        for n in range(count):
            log = (
                (log_dir / f"worker-{len(self.workers)}.log").open("wb")
                if log_dir is not None
                else None
            )
            self.workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "orchestrator.cli", "worker"]
                    + ["--concurrency", str(concurrency)]
                    + ["--loglevel", "INFO" if log is not None else "WARNING"]
                    + (["--name", names[n]] if names else []),
                    cwd=ROOT,
                    env=self.env,
                    stdout=log or subprocess.DEVNULL,
                    stderr=log or subprocess.DEVNULL,
                )
            )
            if log is not None:
                log.close()  # the child has its own descriptor

    def kill_worker(self, index: int = 0) -> None:
        proc = self.workers[index]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop_workers(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    def submit(self, run_id: str, questions: list[str]) -> None:
        self.state.runs.create(
            run_id,
            self.database_url,
            StartedCheckpoint(run_id=run_id, questions=questions),
            status="queued",
            login=login_of_url(self.database_url) or DatabaseLogin(""),
        )
        enqueue(run_id, url=self.broker_url)

    def approve_waiting(self, run_ids: set[str]) -> int:
        """Approve every pending batch of these runs and hand the runs on; how many."""
        gate = ApprovalGate(reviewer=None, validate=_Accepted, store=self.state.approvals)
        done = 0
        for record in self.state.approvals.pending_batches():
            if record.batch.run_id not in run_ids:
                continue
            gate.submit(
                record.batch_id,
                {i.call_id: Approve() for i in record.batch.pending},
                actor="rita",
            )
            enqueue(record.batch.run_id, url=self.broker_url)
            done += 1
        return done

    def finished(self, run_ids: set[str]) -> int:
        return sum(1 for r in run_ids if self.state.runs.load(r).status == "finished")

    def drive(
        self,
        run_ids: set[str],
        *,
        timeout_s: float,
        during: Callable[[int], None] = lambda finished: None,
    ) -> float:
        """Approve as batches open until every run finished; the seconds it took."""
        started = time.monotonic()
        while True:
            self.approve_waiting(run_ids)
            finished = self.finished(run_ids)
            during(finished)
            if finished == len(run_ids):
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                statuses = {r: self.state.runs.load(r).status for r in run_ids}
                raise AssertionError(f"runs still open after {timeout_s} s: {statuses}")
            time.sleep(0.2)


def most_in_any_window(arrivals: list[float], window_s: float) -> int:
    """The largest number of arrivals inside any window of ``window_s`` seconds."""
    times = sorted(arrivals)
    best, start = 0, 0
    for end, moment in enumerate(times):
        while moment - times[start] >= window_s:
            start += 1
        best = max(best, end - start + 1)
    return best


class OwnRedis:
    """A redis-server of our own on a free port, without persistence (as many brokers run): a
    restart loses every message it held. Never the shared server."""

    def __init__(self, workdir: Path) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.workdir = workdir
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()
