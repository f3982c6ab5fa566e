"""Distributed batches under faults: every statement runs once, counted by the database itself.

Run (PostgreSQL for the state and the counted target, RabbitMQ, and redis-server on the PATH):

    .venv/bin/python benchmarks/distributed_chaos.py \\
        --postgres postgresql+psycopg://root@127.0.0.1:5432/test \\
        --rabbitmq amqp://guest:guest@127.0.0.1:5672/sqlgate_25

For each broker (a Redis server of its own without persistence, started by this script on a free
port; RabbitMQ, restarted with ``rabbitmqctl stop_app``/``start_app``) and each fault, one
``sqlgate batch FILE --distributed --yes --run-size 5`` of 100 questions goes through 3
``sqlgate worker`` processes (2 threads each) on a fresh PostgreSQL state database. The model is
the scripted server (``tests/scripted_llm``) answering at once. The target is a PostgreSQL
database with one table per question (``tests/orchestrator/counted_target.py``): each question's
statement is the only thing that reads its table, and PostgreSQL counts the scans.

Faults, one per row:
  client killed     the command is killed (SIGKILL) once results are written; three results in
                    the file are turned into llm_error and a line cut short is appended; the same
                    command is run again
  broker restarted  the broker is down (5 s) when the command starts, then comes back, and is
                    restarted while the 20 runs are queued and no worker runs yet (Redis loses
                    them; RabbitMQ keeps them); then the workers start
  worker killed     the worker advancing the first run seen running is killed (SIGKILL) and
                    another is started

Printed per row: questions answered once (answered in the file, and their statement counted
once by PostgreSQL), statements executed (scans counted by PostgreSQL), runs stuck (runs of the
batch not finished when the command ended). Expected: 100, 100, 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from orchestrator.interfaces.tasks import QUEUE  # noqa: E402
from tests.orchestrator.celery_cluster import Cluster, OwnRedis, TimedScript  # noqa: E402
from tests.orchestrator.counted_target import (  # noqa: E402
    counted_scenarios,
    create_counted_database,
    drop_counted_database,
    question_of,
    statement_counts,
)
from tests.scripted_llm.server import ScriptedLLMServer  # noqa: E402

QUESTIONS = 100
RUN_SIZE = 5
WORKERS = 3
OUTAGE_S = 5.0
COMMAND_TIMEOUT_S = 600.0


def _fresh_state(server: str) -> str:
    name = f"sqlgate_chaos_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return sa.make_url(server).set(database=name).render_as_string(hide_password=False)


class Broker:
    """The broker of one half of the table, and how to take it down and bring it back."""

    def __init__(self, kind: str, url: str, own: OwnRedis | None = None) -> None:
        self.kind = kind
        self.url = url
        self.own = own

    def stop(self) -> None:
        if self.own is not None:
            self.own.stop()
        else:
            subprocess.run(["rabbitmqctl", "stop_app"], check=True, capture_output=True)

    def start(self) -> None:
        if self.own is not None:
            self.own.start()
        else:
            subprocess.run(["rabbitmqctl", "start_app"], check=True, capture_output=True)
            subprocess.run(["rabbitmqctl", "await_startup"], check=True, capture_output=True)

    def queued(self) -> int:
        """Messages waiting in the sqlgate queue."""
        if self.own is not None:
            return int(redis.Redis.from_url(self.url).llen(QUEUE))
        from orchestrator.interfaces.tasks import celery_app

        with celery_app(self.url).connection_for_write() as conn:
            return int(conn.default_channel.queue_declare(QUEUE, passive=True).message_count)


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)


def scenario(broker: Broker, fault: str, args: argparse.Namespace) -> dict[str, Any]:
    state_url = _fresh_state(args.postgres)
    target = create_counted_database(args.postgres, QUESTIONS)
    folder = Path(tempfile.mkdtemp(prefix="sqlgate-chaos-"))
    questions = folder / "questions.txt"
    questions.write_text("\n".join(question_of(n) for n in range(1, QUESTIONS + 1)) + "\n")
    out = folder / "results.jsonl"
    command = [
        sys.executable,
        "-m",
        "orchestrator.cli",
        "batch",
        str(questions),
        "--db",
        target,
    ]
    command += ["--out", str(out), "--distributed", "--yes", "--run-size", str(RUN_SIZE)]
    started = time.monotonic()
    try:
        with ScriptedLLMServer(TimedScript(0.0, counted_scenarios(QUESTIONS))) as model:
            cluster = Cluster(
                broker_url=broker.url,
                state_url=state_url,
                database_url=target,
                model_url=model.base_url,
                rate_limit="100000/60",
                lease_s=3.0,
                visibility_s=600.0,  # recovery is the leases' and the command's, not Redis's
            )
            env = {**cluster.env, "SQLGATE_REQUEUE_AFTER": "5"}

            def client() -> subprocess.Popen[bytes]:
                log = (folder / "client.log").open("ab")
                return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)

            try:
                if fault == "broker restarted":
                    broker.stop()
                    down_at = time.monotonic()
                    proc = client()
                    _wait(
                        lambda: (
                            len(cluster.state.runs.list(status="queued", limit=1000))
                            == QUESTIONS // RUN_SIZE
                        ),
                        "the runs to be recorded",
                    )
                    time.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))
                    broker.start()
                    _wait(lambda: broker.queued() >= QUESTIONS // RUN_SIZE, "the runs to be sent")
                    broker.stop()
                    broker.start()
                    cluster.start_workers(WORKERS, log_dir=folder)
                else:
                    cluster.start_workers(WORKERS, log_dir=folder)
                    proc = client()
                if fault == "client killed":
                    _wait(
                        lambda: out.exists() and len(out.read_text().splitlines()) >= 2 * RUN_SIZE,
                        "results to be written",
                    )
                    proc.send_signal(signal.SIGKILL)
                    proc.wait(timeout=30)
                    lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
                    for record in lines[:3]:
                        record.update(status="llm_error", error=None, answer=None)
                    out.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"questi')
                    proc = client()
                if fault == "worker killed":
                    running: list[dict[str, Any]] = []

                    def one_running() -> bool:
                        running[:] = [r for r in cluster.state.runs.list() if r["owner"]]
                        return bool(running)

                    _wait(one_running, "a run to start")
                    pid = int(running[0]["owner"].split("@")[0].removeprefix("sqlgate-"))
                    cluster.kill_worker([w.pid for w in cluster.workers].index(pid))
                    cluster.start_workers(1, log_dir=folder)
                try:
                    proc.wait(timeout=COMMAND_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            finally:
                cluster.stop_workers()
            elapsed = time.monotonic() - started
            runs = cluster.state.runs.list(limit=10_000)
            cluster.state.close()
        counts = statement_counts(target, QUESTIONS)
        written = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        by_question: dict[str, list[dict[str, Any]]] = {}
        for record in written:
            by_question.setdefault(record["question"], []).append(record)
        answered_once = sum(
            1
            for n in range(1, QUESTIONS + 1)
            if [r["status"] for r in by_question.get(question_of(n), [])] == ["answered"]
            and counts[n] == 1
        )
        return {
            "broker": broker.kind,
            "fault": fault,
            "answered_once": answered_once,
            "statements": sum(counts.values()),
            "stuck": sum(r["status"] != "finished" for r in runs),
            "exit": proc.returncode,
            "takeovers": sum(r["takeovers"] for r in runs),
            "seconds": elapsed,
        }
    finally:
        drop_counted_database(args.postgres, target)
        drop_counted_database(args.postgres, state_url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("SQLGATE_TEST_POSTGRES_URL"))
    parser.add_argument(
        "--rabbitmq",
        default=os.environ.get("SQLGATE_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"),
    )
    parser.add_argument("--brokers", default="redis,rabbitmq", help="which brokers, in order")
    parser.add_argument(
        "--faults", default="client killed,broker restarted,worker killed", help="which faults"
    )
    args = parser.parse_args()
    if not args.postgres:
        parser.error("--postgres (or SQLGATE_TEST_POSTGRES_URL) is needed")
    rows = []
    for kind in args.brokers.split(","):
        own = (
            OwnRedis(Path(tempfile.mkdtemp(prefix="sqlgate-chaos-redis-")))
            if kind == "redis"
            else None
        )
        if own is not None:
            own.start()
        broker = Broker(kind, own.url if own is not None else args.rabbitmq, own)
        try:
            for fault in args.faults.split(","):
                row = scenario(broker, fault, args)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            if own is not None:
                own.stop()
            else:
                broker.start()  # RabbitMQ is shared: it is left running whatever happened
    print(
        f"{'broker':<9} {'fault':<17} {'answered once':>13} {'statements':>10} {'runs stuck':>10}"
        f" {'exit':>4} {'takeovers':>9} {'seconds':>7}"
    )
    for r in rows:
        print(
            f"{r['broker']:<9} {r['fault']:<17} {r['answered_once']:>13} {r['statements']:>10} "
            f"{r['stuck']:>10} {r['exit']:>4} {r['takeovers']:>9} {r['seconds']:>7.1f}"
        )


if __name__ == "__main__":
    main()
