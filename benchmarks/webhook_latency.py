"""Benchmark: time from a batch's creation to its webhook's arrival at a local receiver.

Run: .venv/bin/python benchmarks/webhook_latency.py [--batches 200] [--poll 0.2]
     [--postgres postgresql+psycopg://root@127.0.0.1:5432/test]

What runs: the server's own event machinery, without the model and without HTTP in front of it.
An ``EventHub`` (poll interval ``--poll``, the server's default 0.2 s) follows a state database,
the ``Notifier`` is its listener and sends signed webhooks to a local ``http.server`` receiver.
Each batch is opened through the real ``ApprovalGate`` on the state database, as a paused run
opens it; the clock starts just before ``gate.open`` and stops when the receiver has read the
delivery's body. Batches are opened one at a time (each waits for its delivery, then a random
pause of up to one poll interval, so openings fall anywhere in the hub's polling cycle), so the
figure is one notification's latency, not a queue's. Nothing pokes the hub: the batch is found by the
hub's next poll, as when another process (a worker, the CLI) opened it.

Printed per state database (SQLite file; PostgreSQL when ``--postgres`` is given or
``SQLGATE_TEST_POSTGRES_URL`` is set): p50, p99 and max in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from approvals import ApprovalGate, ApprovalItem  # noqa: E402
from orchestrator.core.state_db import StateDatabase  # noqa: E402
from orchestrator.features.notify import Notifier, WebhookChannel  # noqa: E402
from orchestrator.features.notify.outbox import NotificationStore  # noqa: E402
from orchestrator.interfaces.server.events import EventHub, EventSource  # noqa: E402
from tests.notify.receivers import WebhookReceiver  # noqa: E402


class _Accepted:
    ok = True
    findings: list[object] = []

    def __init__(self, sql: str) -> None:
        self.sql = sql


def measure(state_url: str, batches: int, poll: float) -> list[float]:
    state = StateDatabase(state_url)
    state.setup()
    receiver = WebhookReceiver()
    notifier = Notifier(
        state.store(NotificationStore),
        [WebhookChannel(receiver.url, "bench-secret")],
        base_url="http://x",
    )
    hub = EventHub(EventSource(state.approvals, state.server), poll_interval=poll)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run_loop() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(hub.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run_loop, daemon=True)
    thread.start()
    started.wait()
    hub.listeners.append(notifier.on_event)
    gate = ApprovalGate(None, _Accepted, store=state.approvals, run_id=f"run_{uuid.uuid4().hex}")
    latencies = []
    jitter = random.Random(22)
    try:
        for n in range(batches):
            item = ApprovalItem.new(question_id="q", question="?", sql=f"SELECT {n} AS n")
            time.sleep(jitter.uniform(0, poll))
            t0 = time.monotonic()
            gate.open([item])
            [*_, last] = receiver.wait_for(n + 1, timeout=30)
            if len(receiver.received) < n + 1:
                raise RuntimeError(f"batch {n} was never delivered")
            latencies.append(last.at - t0)
    finally:
        asyncio.run_coroutine_threadsafe(hub.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        notifier.close()
        receiver.close()
        state.close()
    return latencies


def report(name: str, latencies: list[float]) -> None:
    ms = sorted(x * 1000 for x in latencies)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    print(
        f"{name:<12} batches {len(ms):>4}  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  max {ms[-1]:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--poll", type=float, default=0.2, help="the hub's poll interval, s")
    parser.add_argument("--postgres", default=os.environ.get("SQLGATE_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        report("sqlite", measure(f"sqlite:///{folder}/state.sqlite", args.batches, args.poll))
    if args.postgres:
        name = f"sqlgate_bench_{uuid.uuid4().hex[:10]}"
        admin = sa.create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        url = sa.make_url(args.postgres).set(database=name).render_as_string(hide_password=False)
        try:
            report("postgresql", measure(url, args.batches, args.poll))
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.dispose()


if __name__ == "__main__":
    main()
