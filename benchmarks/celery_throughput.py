"""Scale-out on Celery: questions per second with 1 worker process against 3, measured in one run.

Run (needs PostgreSQL for the shared state and Redis for the broker and the shared limiter):

    .venv/bin/python benchmarks/celery_throughput.py \\
        --postgres postgresql+psycopg://root@127.0.0.1:5432/bench --redis redis://127.0.0.1:6379/6

(defaults: $SQLGATE_TEST_POSTGRES_URL and $SQLGATE_TEST_REDIS_URL). For each worker count it
starts that many real ``sqlgate worker`` processes (Celery, ``--concurrency`` threads each) on a
fresh PostgreSQL state database, waits until every one answers a ping, then times one
``sqlgate batch FILE --distributed --yes`` of N distinct questions (default 200, runs of
``--run-size`` questions, one task each) from start to the last record written. The model is
the scripted OpenAI-compatible server (``tests/scripted_llm``) answering every request after
``--latency`` seconds (default 0.2), NOT a live model; the limiter (Redis, shared by every
worker) is set far above what is used, so it is not the bottleneck.

Checked after each run: every question written once; every run ``finished``; every approved
statement claimed once in the execution ledger (none ran twice).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import _harness as h
import sqlalchemy as sa

from orchestrator.interfaces.tasks import celery_app
from tests.orchestrator.celery_cluster import ROOT, Cluster, TimedScript
from tests.scripted_llm import server as scripted_server
from tests.scripted_llm.server import ScriptedLLMServer


def _fresh_database(base: str) -> tuple[str, Any]:
    name = f"sqlgate_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()

    return sa.make_url(base).set(database=name).render_as_string(hide_password=False), drop


def _wait_for_workers(broker: str, count: int, timeout_s: float = 120.0) -> float:
    """Seconds until ``count`` workers answer a ping (their start-up is not timed)."""
    app = celery_app(broker)
    started = time.monotonic()
    while True:
        replies = app.control.ping(timeout=1.0) or []
        if len(replies) >= count:
            return time.monotonic() - started
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"only {len(replies)} of {count} workers answered in {timeout_s} s")


def measure(args: argparse.Namespace, workers: int, questions: list[str], demo: Path) -> dict:
    state_url, drop = _fresh_database(args.postgres)
    script = TimedScript(latency_s=args.latency, scenarios=h.scenarios(copies=args.copies))
    folder = Path(tempfile.mkdtemp(prefix="sqlgate-celery-bench-"))
    file = folder / "questions.txt"
    file.write_text("\n".join(questions) + "\n")
    out = folder / "results.jsonl"
    database = f"sqlite:///{demo}"
    try:
        with ScriptedLLMServer(script) as model:
            cluster = Cluster(
                broker_url=args.redis,
                state_url=state_url,
                database_url=database,
                model_url=model.base_url,
                rate_limit="100000/60",
                rate_backend=args.redis,
                lease_s=30.0,
                visibility_s=300.0,
            )
            try:
                cluster.start_workers(
                    workers, concurrency=args.concurrency, log_dir=folder if args.logs else None
                )
                _wait_for_workers(args.redis, workers)
                command = [
                    sys.executable,
                    "-m",
                    "orchestrator.cli",
                    "batch",
                    str(file),
                ]
                command += ["--db", database, "--out", str(out), "--distributed", "--yes"]
                command += ["--run-size", str(args.run_size), "--k", str(args.run_size)]
                started = time.monotonic()
                done = subprocess.run(
                    command, cwd=ROOT, env=cluster.env, capture_output=True, text=True
                )
                elapsed = time.monotonic() - started
            finally:
                cluster.stop_workers()
            if args.logs:
                print(f"logs of the {workers}-worker run: {folder}")
            if done.returncode != 0:
                raise RuntimeError(f"sqlgate batch --distributed failed: {done.stderr[-2000:]}")
            written = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            runs = cluster.state.runs.list(limit=100_000)
            claims = [
                e.call_id
                for r in runs
                for e in cluster.state.approvals.executions(run_id=r["run_id"])
            ]
            cluster.state.close()
    finally:
        drop()
    answered = sum(r["status"] == "answered" for r in written)
    return {
        "workers": workers,
        "elapsed_s": elapsed,
        "per_s": len(written) / elapsed,
        "written": len(written),
        "distinct": len({r["question"] for r in written}),
        "answered": answered,
        "runs": len(runs),
        "finished": sum(r["status"] == "finished" for r in runs),
        "claims": len(claims),
        "distinct_claims": len(set(claims)),
        "requests": len(script.arrivals),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("SQLGATE_TEST_POSTGRES_URL"))
    parser.add_argument("--redis", default=os.environ.get("SQLGATE_TEST_REDIS_URL"))
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2, help="model latency (seconds)")
    parser.add_argument("--workers", default="1,3", help="worker process counts to compare")
    parser.add_argument("--concurrency", type=int, default=2, help="threads per worker")
    parser.add_argument("--run-size", type=int, default=10, help="questions per run (one task)")
    parser.add_argument("--logs", action="store_true", help="keep the workers' logs (INFO)")
    args = parser.parse_args()
    if not args.postgres or not args.redis:
        parser.error("give --postgres and --redis (or set SQLGATE_TEST_POSTGRES_URL/_REDIS_URL)")
    args.copies = -(-args.questions // 50)
    scripted_server._Handler.disable_nagle_algorithm = True  # see _harness: no 40 ms artefact

    print("=" * 78)
    print(
        f"Celery scale-out: {args.questions} questions, model latency {args.latency:g} s, "
        f"{args.concurrency} threads per worker, runs of {args.run_size}"
    )
    print(
        "Model: sqlgate's scripted OpenAI-compatible server (tests/scripted_llm), in this process, "
        f"each reply sent after {args.latency:g} s; NOT a live model."
    )
    print("=" * 78)
    demo = h.demo_database()
    questions = h.many_questions(args.questions)
    results = [measure(args, int(n), questions, demo) for n in args.workers.split(",")]
    h.table(
        "sqlgate batch --distributed, wall time from start to the last record",
        [
            "workers",
            "seconds",
            "questions/s",
            "answered",
            "runs finished",
            "claims (distinct)",
            "model requests",
        ],
        [
            [
                r["workers"],
                f"{r['elapsed_s']:.1f}",
                f"{r['per_s']:.2f}",
                f"{r['answered']}/{r['written']}",
                f"{r['finished']}/{r['runs']}",
                f"{r['claims']} ({r['distinct_claims']})",
                r["requests"],
            ]
            for r in results
        ],
    )
    base = results[0]
    for r in results[1:]:
        print(
            f"throughput with {r['workers']} workers / {base['workers']} worker: "
            f"{r['per_s'] / base['per_s']:.2f}x"
        )
    problems = [
        f"{r['workers']} worker(s): {what}"
        for r in results
        for what, bad in (
            (
                "a question missing or written twice",
                r["written"] != args.questions or r["distinct"] != args.questions,
            ),
            ("a run did not finish", r["finished"] != r["runs"]),
            ("a statement was claimed twice", r["claims"] != r["distinct_claims"]),
        )
        if bad
    ]
    print(
        "check: every question written once, every run finished, no statement ran twice: "
        + ("OK" if not problems else "FAILED " + "; ".join(problems))
    )
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
