"""Load on ``sqlgate serve`` over loopback: SSE fan-out latency and the list endpoint's throughput.

Run: .venv/bin/python benchmarks/server_load.py [--batches 10000] [--clients 50] [--decisions 200]
     [--state-url postgresql+psycopg://root@127.0.0.1:5432/scratch]
     (default: a fresh SQLite file; a --state-url should name an empty scratch database: the
     benchmark adds its batches there and leaves them)

1. The state database is seeded with ``--batches`` pending approval batches (two statements each),
   written through the approvals gate as the pipeline writes them.
2. The server starts in a child process (uvicorn, one worker process, the app as ``sqlgate serve``
   builds it) on 127.0.0.1; the model is never called (no runs are asked).
3. ``--clients`` reviewers follow ``/events`` at once. The benchmark then decides ``--decisions``
   batches one after the other over HTTP; for each, the time from sending the decision to each
   client's receipt of its ``approval_decided`` event is one latency sample (clients x decisions
   samples). Prints p50 / p99 / max (target: p99 < 500 ms).
4. ``GET /approvals`` (100 pending summaries of the 10,000) from 10 concurrent connections for
   ``--seconds``: requests per second, and p50 / p99 latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOKENS = [{"token": "bench-reviewer", "actor": "bench", "role": "reviewer"}]
HEADERS = {"Authorization": "Bearer bench-reviewer"}


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


def seed(state_url: str, batches: int) -> float:
    """Open ``batches`` pending batches; seconds taken."""
    from approvals import ApprovalGate, ApprovalItem, SqlApprovalStore

    store = SqlApprovalStore(state_url)
    store.setup()
    started = time.perf_counter()
    for n in range(batches):
        gate = ApprovalGate(
            reviewer=None,
            validate=_Accepted,
            store=store,
            run_id=f"run_load{n:06d}",
            context={"dialect": "sqlite"},
        )
        gate.open(
            [
                ApprovalItem.new(
                    question_id="q1",
                    question=f"How many orders in batch {n}?",
                    sql="SELECT COUNT(*) AS n FROM orders LIMIT 1",
                ),
                ApprovalItem.new(
                    question_id="q2",
                    question=f"How many customers in batch {n}?",
                    sql="SELECT COUNT(*) AS n FROM customers LIMIT 1",
                ),
            ]
        )
        if n and n % 2000 == 0:
            print(f"  seeded {n} batches", flush=True)
    store.close()
    return time.perf_counter() - started


def serve(state_url: str, db: str) -> None:
    """The child process: print the base URL, serve until standard input closes."""
    import threading

    import uvicorn

    from orchestrator.core.llm import LLMSettings
    from orchestrator.interfaces.server import ServerConfig, TokenRegistry, create_app
    from ratelimit import SlidingWindowLimiter

    config = ServerConfig(
        database_url=db,
        state_url=state_url,
        tokens=TokenRegistry.from_json(json.dumps(TOKENS)),
        llm=LLMSettings(model="unused", base_url="http://127.0.0.1:9/v1"),
        limiter=SlidingWindowLimiter(limit=10, window=60.0),
        poll_interval=0.2,
        keepalive=5.0,
    )
    app = create_app(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}", flush=True)

    def stop_on_eof() -> None:
        sys.stdin.read()
        server.should_exit = True

    threading.Thread(target=stop_on_eof, daemon=True).start()
    server.run(sockets=[sock])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def follow(
    base_url: str, received: dict[str, list[float]], ready: asyncio.Event, count: list[int]
) -> None:
    import httpx

    async with (
        httpx.AsyncClient(base_url=base_url, headers=HEADERS, timeout=None) as client,
        client.stream("GET", "/events") as response,
    ):
        count[0] += 1
        if count[0] == count[1]:
            ready.set()
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "approval_decided":
                received.setdefault(json.loads(line[6:])["batch_id"], []).append(
                    time.perf_counter()
                )


async def fan_out(base_url: str, clients: int, decisions: int) -> list[float]:
    import httpx

    received: dict[str, list[float]] = {}
    ready = asyncio.Event()
    count = [0, clients]
    followers = [
        asyncio.create_task(follow(base_url, received, ready, count)) for _ in range(clients)
    ]
    await asyncio.wait_for(ready.wait(), 60)
    await asyncio.sleep(0.5)
    samples: list[float] = []
    async with httpx.AsyncClient(base_url=base_url, headers=HEADERS, timeout=30) as client:
        pending = (await client.get("/approvals", params={"limit": decisions})).json()
        for summary in pending:
            batch = (await client.get(f"/approvals/{summary['batch_id']}")).json()
            body = {"decisions": {cid: "approve" for cid in batch["pending_ids"]}}
            sent = time.perf_counter()
            response = await client.post(f"/approvals/{summary['batch_id']}/decision", json=body)
            assert response.status_code == 200, response.text
            deadline = time.perf_counter() + 10
            while (
                len(received.get(summary["batch_id"], [])) < clients
                and time.perf_counter() < deadline
            ):
                await asyncio.sleep(0.002)
            got = received.get(summary["batch_id"], [])
            if len(got) < clients:
                print(
                    f"  {clients - len(got)} client(s) missed the decision of {summary['batch_id']}"
                )
            samples.extend((t - sent) * 1000.0 for t in got)
    for task in followers:
        task.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    return samples


async def list_rate(
    base_url: str, seconds: float, connections: int = 10
) -> tuple[int, list[float]]:
    import httpx

    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        async with httpx.AsyncClient(base_url=base_url, headers=HEADERS, timeout=30) as client:
            while time.perf_counter() < stop:
                started = time.perf_counter()
                response = await client.get("/approvals")
                assert response.status_code == 200 and len(response.json()) == 100
                latencies.append((time.perf_counter() - started) * 1000.0)

    await asyncio.gather(*(worker() for _ in range(connections)))
    return len(latencies), latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--decisions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--state-url", default=None)
    parser.add_argument("--serve", nargs=2, metavar=("STATE_URL", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return

    from orchestrator.features.demo.database import build_demo_database

    workdir = Path(tempfile.mkdtemp(prefix="sqlgate-load-"))
    state_url = args.state_url or f"sqlite:///{workdir / 'state.sqlite'}"
    db = f"sqlite:///{build_demo_database(workdir / 'demo.sqlite')}"
    print(f"state database: {state_url.split('@')[-1]}")
    took = seed(state_url, args.batches)
    print(f"seeded {args.batches} pending batches in {took:.1f} s")

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", state_url, db],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        base_url = child.stdout.readline().strip()  # type: ignore[union-attr]
        if not base_url.startswith("http"):
            raise SystemExit("the server did not start")
        import httpx

        for _ in range(200):
            try:
                if httpx.get(f"{base_url}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        samples = asyncio.run(fan_out(base_url, args.clients, args.decisions))
        print(
            f"\ndecision -> approval_decided event, {args.clients} SSE clients x {args.decisions} decisions "
            f"({len(samples)} samples):"
        )
        print(
            f"  p50 {percentile(samples, 0.5):7.1f} ms   p99 {percentile(samples, 0.99):7.1f} ms   "
            f"max {max(samples):7.1f} ms   "
            f"(target p99 < 500 ms: {'met' if percentile(samples, 0.99) < 500 else 'MISSED'})"
        )
        requests, latencies = asyncio.run(list_rate(base_url, args.seconds))
        print(
            f"\nGET /approvals (100 of {args.batches - args.decisions} pending), 10 connections, {args.seconds:g} s:"
        )
        print(
            f"  {requests / args.seconds:7.1f} requests/s   p50 {statistics.median(latencies):6.1f} ms   "
            f"p99 {percentile(latencies, 0.99):6.1f} ms"
        )
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(timeout=30)


if __name__ == "__main__":
    main()
