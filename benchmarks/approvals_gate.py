"""Approval gate figures: decision to resumed run (beside LangGraph's resume) and listing pending.

Run: .venv/bin/python benchmarks/approvals_gate.py [--url URL] [--pg-url URL] [--rounds N]
     [--pending N]

1. Decision to resumed run. A run paused at the gate waits with ``ApprovalGate.await_outcome``
   in its own thread and event loop; a reviewer submits through a second store object. Measured
   from the start of ``submit`` to the moment the waiting run has the outcome in hand, for:

   - in-process: a ``MemoryApprovalStore`` shared by both (woken by the in-process signal);
   - SQLite, same process: two stores on one file (woken by the in-process signal);
   - SQLite, polled every 10 ms: the reviewer sends no notification (the path before
     notifications; a reviewer in another process on SQLite is found by polling too, every
     0.5 s by default);
   - PostgreSQL, ``NOTIFY``: the reviewer shares nothing in-process with the waiter, as
     another process (woken by the waiter's ``LISTEN`` connection);
   - PostgreSQL, polled every 10 ms (the path before notifications).

   Beside them, in the same run, LangGraph's resume of a node paused with ``interrupt()``
   (``graph.invoke(Command(resume=...))``) with its in-memory, SQLite and PostgreSQL
   checkpointers: from the call to the moment the node has the decision ("node resumed"),
   and to the call's return ("end to end"). Skipped with a note when langgraph is not installed
   (``pip install 'sqlgate[bench]'``).
2. Listing pending batches with N pending in the store (target < 100 ms for 10,000):
   ``list_summaries()`` (what ``approvals list`` shows: ids, cycle, times, counts), a page of
   full batches ``pending_batches(limit=50)``, and every full batch ``pending_batches()``.

Without ``--url`` a fresh SQLite file in a temporary directory is used; ``--pg-url`` (default
``$SQLGATE_TEST_POSTGRES_URL``) adds the PostgreSQL rows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from approvals import (  # noqa: E402
    ApprovalGate,
    ApprovalItem,
    ApprovalStore,
    Approve,
    DecisionSignals,
    MemoryApprovalStore,
    SqlApprovalStore,
)

WARMUP = 5


class Accepted:
    """A validator stand-in that accepts the SQL as written (validation is not measured here)."""

    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def line(label: str, values: list[float], note: str = "") -> str:
    ms = lambda p: f"{percentile(values, p) * 1000:7.2f} ms"  # noqa: E731
    return f"  {label:<44} p50 {ms(50)}  p99 {ms(99)}  {note}".rstrip()


def decision_to_resume(
    label: str,
    waiting_store: ApprovalStore,
    reviewer_store: ApprovalStore,
    rounds: int,
    poll: float | None,
) -> list[float]:
    """Latency from ``submit`` to the waiter holding the outcome; prints a line, returns them."""
    run = ApprovalGate(None, Accepted, store=waiting_store)
    reviewer = ApprovalGate(None, Accepted, store=reviewer_store)
    total: list[float] = []
    submit: list[float] = []
    wakes: Counter[str] = Counter()
    for n in range(rounds + WARMUP):
        items = [
            ApprovalItem.new(question_id=f"q{k}", question="?", sql=f"SELECT {k} LIMIT 1")
            for k in range(3)
        ]
        batch = run.open(items)
        parked = threading.Event()
        resumed: list[float] = []
        reasons: list[str] = []
        waiter = threading.Thread(
            target=wait_in_loop, args=(run, batch.batch_id, poll, parked, resumed, reasons)
        )
        waiter.start()
        parked.wait()
        time.sleep(0.001 * (n % 5))  # decisions land at different points of a poll cycle
        t0 = time.perf_counter()
        reviewer.submit(batch.batch_id, {i.call_id: Approve() for i in items}, actor="bench")
        submitted = time.perf_counter()
        waiter.join()
        if n >= WARMUP:
            total.append(resumed[0] - t0)
            submit.append(submitted - t0)
            wakes.update(reasons[-1:])
    woke = ", ".join(f"{reason} {count}" for reason, count in sorted(wakes.items()))
    print(line(label, total, f"submit alone p50 {percentile(submit, 50) * 1000:.2f} ms"))
    print(f"  {'':<44} (woken by: {woke})")
    return total


def wait_in_loop(
    run: ApprovalGate,
    batch_id: str,
    poll: float | None,
    parked: threading.Event,
    resumed: list[float],
    reasons: list[str],
) -> None:
    """The paused run: its own event loop, waiting for ``batch_id``; notes when it has it."""

    async def park(seconds: float) -> None:
        parked.set()  # the waiter has read the batch pending and waits now
        await asyncio.sleep(seconds)

    async def main() -> None:
        await run.await_outcome(batch_id, poll=poll, sleep=park, on_wake=reasons.append)
        resumed.append(time.perf_counter())

    asyncio.run(main())


def sqlgate_rows(sqlite_url: str, pg_url: str | None, rounds: int) -> None:
    memory = MemoryApprovalStore()
    decision_to_resume("sqlgate in-process (memory store)", memory, memory, rounds, None)
    a, b = SqlApprovalStore(sqlite_url), SqlApprovalStore(sqlite_url)
    a.setup()
    decision_to_resume("sqlgate SQLite, same process (notified)", a, b, rounds, None)
    silent = SqlApprovalStore(sqlite_url, signals=DecisionSignals(), notify=False)
    decision_to_resume("sqlgate SQLite, polled every 10 ms", a, silent, rounds, 0.01)
    for store in (a, b, silent):
        store.close()
    if pg_url is None:
        print("  (PostgreSQL rows skipped: no --pg-url and no SQLGATE_TEST_POSTGRES_URL)")
        return
    with pg_schema(pg_url) as engine_for:
        waiting = SqlApprovalStore(engine_for())
        waiting.setup()
        # the waiting process keeps its LISTEN connection between waits, as a server does
        keep_listening = waiting.on_decisions(lambda _reason: None)
        elsewhere = SqlApprovalStore(engine_for(), signals=DecisionSignals())
        decision_to_resume(
            "sqlgate PostgreSQL, other process (NOTIFY)", waiting, elsewhere, rounds, None
        )
        silent = SqlApprovalStore(engine_for(), signals=DecisionSignals(), notify=False)
        decision_to_resume("sqlgate PostgreSQL, polled every 10 ms", waiting, silent, rounds, 0.01)
        keep_listening()
        for store in (waiting, elsewhere, silent):
            store.close()


@contextmanager
def pg_schema(url: str) -> Iterator[Callable[[], object]]:
    """A scratch schema on the PostgreSQL server; yields a factory of engines bound to it."""
    import sqlalchemy as sa

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield lambda: sa.create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def langgraph_rows(sqlite_path: str, pg_url: str | None, rounds: int) -> None:
    try:
        from langgraph.checkpoint.memory import InMemorySaver
    except ImportError:
        print(
            "  (LangGraph rows skipped: langgraph is not installed; pip install 'sqlgate[bench]')"
        )
        return
    langgraph_resume("LangGraph in-memory", InMemorySaver(), rounds)
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        print("  (LangGraph SQLite skipped: langgraph-checkpoint-sqlite is not installed)")
    else:
        conn = sqlite3.connect(sqlite_path, check_same_thread=False)
        langgraph_resume("LangGraph SQLite", SqliteSaver(conn), rounds)
        conn.close()
    if pg_url is None:
        return
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        print("  (LangGraph PostgreSQL skipped: langgraph-checkpoint-postgres is not installed)")
        return
    import sqlalchemy as sa

    conninfo = (
        sa.make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False)
    )
    with PostgresSaver.from_conn_string(conninfo) as saver:
        saver.setup()
        langgraph_resume("LangGraph PostgreSQL", saver, rounds)


def langgraph_resume(label: str, saver: object, rounds: int) -> None:
    """A graph ``gate -> run``; ``gate`` pauses with ``interrupt()``; resumed with the decision."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    class State(TypedDict, total=False):
        sql: list[str]
        decision: dict

    node_resumed: list[float] = []

    def gate(state: State) -> State:
        decision = interrupt({"sql": state["sql"]})
        node_resumed.append(time.perf_counter())
        return {"decision": decision}

    def run(state: State) -> State:
        return {}

    builder = StateGraph(State)
    builder.add_node("gate", gate)
    builder.add_node("run", run)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", "run")
    builder.add_edge("run", END)
    graph = builder.compile(checkpointer=saver)  # type: ignore[arg-type]
    to_node, end_to_end = [], []
    for n in range(rounds + WARMUP):
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        graph.invoke({"sql": [f"SELECT {k} LIMIT 1" for k in range(3)]}, config)
        node_resumed.clear()
        t0 = time.perf_counter()
        graph.invoke(Command(resume={"q0": "approve", "q1": "approve", "q2": "approve"}), config)
        done = time.perf_counter()
        if n >= WARMUP:
            to_node.append(node_resumed[0] - t0)
            end_to_end.append(done - t0)
    print(line(f"{label}: resume to node resumed", to_node))
    print(line(f"{label}: resume end to end", end_to_end))


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
    parser.add_argument(
        "--pg-url",
        default=os.environ.get("SQLGATE_TEST_POSTGRES_URL"),
        help="a PostgreSQL server for the PostgreSQL rows (default: $SQLGATE_TEST_POSTGRES_URL)",
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--pending", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(
            f"decision to resumed run, {args.rounds} batches of 3 items each "
            f"(after {WARMUP} unmeasured), one process"
        )
        sqlgate_rows(args.url or f"sqlite:///{tmp}/latency.sqlite3", args.pg_url, args.rounds)
        langgraph_rows(f"{tmp}/langgraph.sqlite3", args.pg_url, args.rounds)
        if args.pending:
            list_pending(args.url or f"sqlite:///{tmp}/pending.sqlite3", args.pending)


if __name__ == "__main__":
    main()
