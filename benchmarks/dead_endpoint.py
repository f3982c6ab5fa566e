"""How fast sqlgate gives up on a model endpoint that is down, through the real CLI.

``OPENAI_BASE_URL`` points at a local port nothing listens on (every connection is refused).
The script runs ``sqlgate batch`` on a file of N questions against the demo database, then one
``sqlgate ask``, each in a fresh process with a private state folder and the default limiter
(5 requests per 60 s, shared through the state folder's SQLite file), and prints:

- the batch's wall time, how many records were written and with which status;
- the model requests the limiter was charged with (the shared window, read after the batch);
- whether the ``ask`` right after it was refused by the rate limiter (it must not be).

    .venv/bin/python benchmarks/dead_endpoint.py [--questions 30]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQLGATE = [sys.executable, "-m", "orchestrator.cli"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=30)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from orchestrator.features.demo.database import build_demo_database

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = build_demo_database(work / "demo.sqlite")
        questions = work / "questions.txt"
        questions.write_text(
            "".join(f"How many orders were placed in month {i}?\n" for i in range(args.questions))
        )
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1",
            "OPENAI_API_KEY": "unused",
            "SQLGATE_STATE_DIR": str(work / "state"),
            "SQLGATE_MEMORY": "off",
        }
        out = work / "results.jsonl"
        started = time.perf_counter()
        batch = subprocess.run(
            [*SQLGATE, "batch", str(questions), "--db", f"sqlite:///{db}", "--out", str(out)]
            + ["--yes"],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        batch_s = time.perf_counter() - started
        records = (
            [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        )
        statuses: dict[str, int] = {}
        for record in records:
            statuses[record["status"]] = statuses.get(record["status"], 0) + 1
        limits = subprocess.run(
            [*SQLGATE, "limits", "--json"], env=env, capture_output=True, text=True, cwd=ROOT
        )
        started = time.perf_counter()
        ask = subprocess.run(
            [*SQLGATE, "ask", "How many customers are there?", "--db", f"sqlite:///{db}"]
            + ["--yes", "--json"],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        ask_s = time.perf_counter() - started
        ask_status = json.loads(ask.stdout)["status"] if ask.stdout.strip() else "?"

    print(f"dead endpoint, {args.questions} questions through `sqlgate batch --yes`:")
    print(f"  wall time          {batch_s:.1f} s (exit {batch.returncode})")
    print(f"  records written    {len(records)} of {args.questions}: {statuses}")
    print(f"  limiter afterwards {limits.stdout.strip() or limits.stderr.strip()}")
    print(f"then one `sqlgate ask`: {ask_s:.1f} s, status {ask_status} (exit {ask.returncode})")


if __name__ == "__main__":
    main()
