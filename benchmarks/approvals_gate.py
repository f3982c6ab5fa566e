"""Approval gate figures on the durable store: decision-to-resume latency and listing pending batches.

Run: .venv/bin/python benchmarks/approvals_gate.py [--url URL] [--rounds N] [--pending N]

1. Decision-to-resume latency (target p99 < 500 ms on SQLite): a run paused at the gate waits
   with ``ApprovalGate.await_outcome`` (its own store connection, as another process would, poll
   10 ms); a reviewer submits through a second store. Measured from the start of ``submit`` to
   the moment the waiting run has the outcome in hand; also the ``submit`` part alone.
2. Listing pending batches with N pending in the store (target < 100 ms for 10,000):
   ``list_summaries()`` (what ``approvals list`` shows: ids, cycle, times, counts), a page of
   full batches ``pending_batches(limit=50)``, and every full batch ``pending_batches()``.

Without ``--url`` a fresh SQLite file in a temporary directory is used.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from approvals import ApprovalGate, ApprovalItem, Approve, SqlApprovalStore  # noqa: E402


class Accepted:
    """A validator stand-in that accepts the SQL as written (validation is not measured here)."""

    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def decision_to_resume(url: str, rounds: int) -> None:
    waiting_store, reviewer_store = SqlApprovalStore(url), SqlApprovalStore(url)
    waiting_store.setup()
    run = ApprovalGate(None, Accepted, store=waiting_store)
    reviewer = ApprovalGate(None, Accepted, store=reviewer_store)
    total, submit_only = [], []
    for n in range(rounds):
        items = [
            ApprovalItem.new(question_id=f"q{k}", question="?", sql=f"SELECT {k} LIMIT 1")
            for k in range(3)
        ]
        batch = run.open(items)
        started = threading.Event()
        resumed: list[float] = []

        def wait(started: threading.Event, batch_id: str, resumed: list[float]) -> None:
            async def main() -> None:
                started.set()
                await run.await_outcome(batch_id, poll=0.01)
                resumed.append(time.perf_counter())

            asyncio.run(main())

        waiter = threading.Thread(target=wait, args=(started, batch.batch_id, resumed))
        waiter.start()
        started.wait()
        time.sleep(0.003 * (n % 5))  # decisions land at different points of the poll cycle
        t0 = time.perf_counter()
        reviewer.submit(batch.batch_id, {i.call_id: Approve() for i in items}, actor="bench")
        submit_only.append(time.perf_counter() - t0)
        waiter.join()
        total.append(resumed[0] - t0)
    ms = lambda xs, p: f"{percentile(xs, p) * 1000:8.2f} ms"  # noqa: E731
    print(
        f"decision-to-resume over {rounds} batches of 3 items ({waiting_store.dialect}, poll 10 ms)"
    )
    print(
        f"  submit (validate, conditional update, audit)  p50 {ms(submit_only, 50)}  p99 {ms(submit_only, 99)}"
    )
    print(
        f"  decision to resumed run                       p50 {ms(total, 50)}  p99 {ms(total, 99)}"
        f"  max {max(total) * 1000:.2f} ms"
    )
    waiting_store.close()
    reviewer_store.close()


def list_pending(url: str, pending: int) -> None:
    store = SqlApprovalStore(url)
    store.setup()
    gate = ApprovalGate(None, Accepted, store=store)
    t0 = time.perf_counter()
    for n in range(pending):
        gate.open(
            [ApprovalItem.new(question_id=f"q{n}", question="How many?", sql=f"SELECT {n} LIMIT 1")]
        )
    filled = time.perf_counter() - t0
    print(
        f"listing with {pending:,} pending batches in the store ({store.dialect}; filled in {filled:.1f} s)"
    )
    for label, call in (
        ("list_summaries()            ", lambda: store.list_summaries()),
        ("pending_batches(limit=50)   ", lambda: store.pending_batches(limit=50)),
        ("pending_batches()           ", lambda: store.pending_batches()),
    ):
        times = []
        for _ in range(7):
            t = time.perf_counter()
            found = call()
            times.append(time.perf_counter() - t)
        print(
            f"  {label} {len(found):>6,} batches  median {statistics.median(times) * 1000:8.2f} ms"
            f"  best {min(times) * 1000:8.2f} ms"
        )
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url", help="SQLAlchemy URL of the store (default: a temporary SQLite file)"
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pending", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        decision_to_resume(args.url or f"sqlite:///{tmp}/latency.sqlite3", args.rounds)
        list_pending(args.url or f"sqlite:///{tmp}/pending.sqlite3", args.pending)


if __name__ == "__main__":
    main()
