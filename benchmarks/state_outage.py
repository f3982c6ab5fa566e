"""The state database restarts under a distributed batch: what each run of it ends as.

Run (PostgreSQL for the counted target, Redis for the broker, PostgreSQL server binaries for a
private cluster started by this script):

    .venv/bin/python benchmarks/state_outage.py \\
        --postgres postgresql+psycopg://root@127.0.0.1:5432/test --redis redis://127.0.0.1:6379/13

Each row is one ``sqlgate batch FILE --distributed --yes --run-size 4`` of 100 questions through 2
``sqlgate worker`` processes (2 threads each), the scripted model answering after 50 ms, on a
state database in a PostgreSQL cluster of this script's own (``initdb`` + ``pg_ctl`` on a free
port). Once 12 results are written, the cluster is stopped with a fast shutdown (every
connection ended, as a restart or failover does), stays down ``--down`` seconds and starts
again. The target has one table per question, so PostgreSQL's own scan counter tells how many
times each statement ran. ``SQLGATE_STATE_PATIENCE`` is the row's: the default (60 s) and 0 (no
patience: the behaviour before retrying). With ``--restarts-at 10,40,70`` the cluster is
restarted instead each time the execution ledger holds that many claims: the restarts land while
the workers claim, send and settle statements and save their results.

Printed per row: restarts, questions answered once (answered in the file and counted once by
PostgreSQL), questions ended ``execution_in_doubt``, statements executed twice, the client's exit
status, workers still running, seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.orchestrator.celery_cluster import Cluster, TimedScript  # noqa: E402
from tests.orchestrator.counted_target import (  # noqa: E402
    counted_scenarios,
    create_counted_database,
    drop_counted_database,
    question_of,
    statement_counts,
)
from tests.orchestrator.own_postgres import OwnPostgres  # noqa: E402
from tests.scripted_llm.server import ScriptedLLMServer  # noqa: E402

QUESTIONS = 100


def one_row(args: argparse.Namespace, patience: str) -> dict[str, object]:
    cluster_pg = OwnPostgres()
    cluster_pg.start()
    target = create_counted_database(args.postgres, QUESTIONS)
    folder = Path(tempfile.mkdtemp(prefix="sqlgate-outage-"))
    questions = folder / "questions.txt"
    questions.write_text("\n".join(question_of(n) for n in range(1, QUESTIONS + 1)) + "\n")
    out = folder / "results.jsonl"
    started = time.monotonic()
    try:
        with ScriptedLLMServer(TimedScript(0.05, counted_scenarios(QUESTIONS))) as model:
            cluster = Cluster(
                broker_url=args.redis,
                state_url=cluster_pg.database(),
                database_url=target,
                model_url=model.base_url,
                lease_s=15.0,
            )
            cluster.env["SQLGATE_STATE_PATIENCE"] = patience
            command = [sys.executable, "-m", "orchestrator.cli", "batch", str(questions)]
            command += ["--db", target, "--out", str(out), "--distributed", "--yes", "--k", "4"]
            try:
                cluster.start_workers(2, log_dir=folder)
                with (folder / "client.log").open("wb") as log:
                    client = subprocess.Popen(
                        command, cwd=ROOT, env=cluster.env, stdout=log, stderr=log
                    )
                    down_s = 0.0
                    for claims in args.restarts_at or [0]:
                        while not (
                            len(cluster.state.approvals.executions()) >= claims
                            if claims
                            else out.exists() and len(out.read_text().splitlines()) >= 12
                        ):
                            if client.poll() is not None or time.monotonic() - started > 300:
                                raise RuntimeError(f"no progress; see {folder}/client.log")
                            time.sleep(0.05)
                        down_s = max(down_s, cluster_pg.restart(down_s=args.down))
                    try:
                        client.wait(timeout=600)
                    except subprocess.TimeoutExpired:
                        client.kill()
                        client.wait()
                alive = sum(1 for w in cluster.workers if w.poll() is None)
            finally:
                cluster.stop_workers()
            cluster.state.close()
        records = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        counts = statement_counts(target, QUESTIONS)
        status = {r["question"]: r["status"] for r in records}
        once = sum(
            1
            for n in range(1, QUESTIONS + 1)
            if status.get(question_of(n)) == "answered" and counts[n] == 1
        )
        return {
            "patience": patience,
            "restarts": len(args.restarts_at or [0]),
            "down_s": round(down_s, 1),
            "answered_once": once,
            "in_doubt": sum(1 for s in status.values() if s == "execution_in_doubt"),
            "twice": sum(1 for n in counts.values() if n > 1),
            "exit": client.returncode,
            "workers_alive": f"{alive}/2",
            "seconds": round(time.monotonic() - started, 1),
        }
    finally:
        drop_counted_database(args.postgres, target)
        cluster_pg.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="server for the counted target")
    parser.add_argument("--redis", required=True, help="the broker")
    parser.add_argument("--down", type=float, default=2.0, help="seconds the cluster stays down")
    parser.add_argument("--patience", default="60,0", help="SQLGATE_STATE_PATIENCE per row")
    parser.add_argument(
        "--restarts-at",
        type=lambda text: [int(n) for n in text.split(",")],
        default=None,
        help="restart each time the ledger holds this many claims (e.g. 10,40,70)",
    )
    args = parser.parse_args()
    columns = (
        "patience",
        "restarts",
        "down_s",
        "answered_once",
        "in_doubt",
        "twice",
        "exit",
        "workers_alive",
        "seconds",
    )
    print(" ".join(f"{c:>13}" for c in columns))
    for patience in args.patience.split(","):
        row = one_row(args, patience)
        print(" ".join(f"{row[c]!s:>13}" for c in columns), flush=True)


if __name__ == "__main__":
    main()
