"""sqlgate driven by a real (weak) model on this machine: every run ends with a defined status and
no traceback, the call budget holds, what the server counted is what the records say, and the
request timeout is honoured.

SmolLM2-135M cannot answer these questions; what is checked is how its real output (cut replies,
valid JSON that answers nothing, slow CPU replies) moves through the pipeline.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.core.result import RunStatus

pytestmark = pytest.mark.live_model

#: Spider dev questions on concert_singer (the first ones of dev.json for that database).
QUESTIONS = [
    "How many singers do we have?",
    "Show name, country, age for all singers ordered by age from the oldest to the youngest.",
    "What is the average, minimum, and maximum age of all singers from France?",
]
#: Exit code of each status (README, "Exit codes").
EXIT = {
    "answered": 0,
    "invalid_input": 2,
    "needs_clarification": 3,
    "rejected": 4,
    "unsafe": 5,
    "execution_failed": 6,
    "timed_out": 7,
    "rate_limited": 8,
    "llm_error": 9,
    "database_error": 10,
}
#: LLM calls a question may take at most (a data question with two corrections).
CALL_BUDGET = 5


def _sqlgate(*args: str, env: dict[str, Any], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _check_record(record: dict[str, Any]) -> None:
    """What every record must say, whatever the model did."""
    assert record["status"] in {s.value for s in RunStatus}
    assert record["llm_calls"] <= CALL_BUDGET
    # one request per call, one more for a repair (no retries: SQLGATE_LLM_ATTEMPTS=1); a batched
    # call's requests are shared, so a record's share can only be smaller
    assert record["http_requests"] <= 2 * record["llm_calls"]
    if record["llm_calls"]:
        assert any(t["llm_call"] is not None for t in record["trace"])  # every call is traced
    # the server's token count, also for a failed call; only a request that got no reply in
    # time (llm_timeout) has none a client can know of
    replied = not any("llm_timeout" in t["output_summary"] for t in record["trace"])
    if record["http_requests"] and replied:
        assert record["tokens"]["prompt"] > 0
    if record["status"] != "answered":
        assert record["error"] and record["error"]["message"].strip()


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in after}


def test_ask_ends_with_a_defined_status_and_records_what_the_server_counted(
    live_server, live_env, concert_singer: Path
) -> None:
    before = live_server.stats()
    started = time.monotonic()
    done = _sqlgate(
        "ask", QUESTIONS[0], "--db", f"sqlite:///{concert_singer}", "--yes", "--json",
        env=live_env,
        timeout=600,
    )  # fmt: skip
    seconds = time.monotonic() - started
    seen = _delta(before, live_server.stats())

    assert "Traceback" not in done.stderr, done.stderr
    record = json.loads(done.stdout)
    assert done.returncode == EXIT[record["status"]], (done.returncode, record["status"])
    _check_record(record)
    assert record["http_requests"] == seen["requests"]
    assert record["tokens"] == {  # the tokens of every reply the server sent
        "prompt": seen["prompt_tokens"],
        "completion": seen["completion_tokens"],
    }
    print(
        f"\nlive ask: {record['status']} ({(record['error'] or {}).get('code')}), "
        f"{record['llm_calls']} call(s), {record['http_requests']} request(s), "
        f"tokens {record['tokens']}, {seconds:.1f} s"
    )


def test_batch_ends_every_question_with_a_defined_status_within_the_budget(
    live_server, live_env, concert_singer: Path, tmp_path: Path
) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text("\n".join(QUESTIONS) + "\n")
    out = tmp_path / "results.jsonl"
    before = live_server.stats()
    started = time.monotonic()
    done = _sqlgate(
        "batch", str(questions), "--db", f"sqlite:///{concert_singer}", "--out", str(out),
        "--yes", "--k", "3",
        env=live_env,
        timeout=900,
    )  # fmt: skip
    seconds = time.monotonic() - started
    seen = _delta(before, live_server.stats())

    assert "Traceback" not in done.stderr, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["question"] for r in records] == QUESTIONS
    ok = all(r["status"] in ("answered", "needs_clarification") for r in records)
    assert done.returncode == (0 if ok else 13), done.stderr
    for record in records:
        _check_record(record)
    # shared calls are charged once in all: the records add up to what the server saw
    assert sum(r["http_requests"] for r in records) == seen["requests"]
    assert sum(r["tokens"]["prompt"] for r in records) == seen["prompt_tokens"]
    assert sum(r["tokens"]["completion"] for r in records) == seen["completion_tokens"]
    # never more than asking each question alone, with a repair, at every stage
    assert seen["requests"] <= 2 * CALL_BUDGET * len(QUESTIONS)
    statuses = [f"{r['status']}({(r['error'] or {}).get('code')})" for r in records]
    print(
        f"\nlive batch: {statuses}, {seen['requests']} request(s), "
        f"{seen['replies']} reply(ies), tokens {seen['prompt_tokens']}+{seen['completion_tokens']}, "
        f"{seconds:.1f} s"
    )


def test_a_tiny_timeout_ends_quickly_with_a_timeout_status(
    live_server, live_env, concert_singer: Path
) -> None:
    env = {**live_env, "SQLGATE_LLM_TIMEOUT": "0.2", "SQLGATE_LLM_ATTEMPTS": "2"}
    started = time.monotonic()
    done = _sqlgate(
        "ask", QUESTIONS[0], "--db", f"sqlite:///{concert_singer}", "--yes", "--json",
        env=env,
        timeout=120,
    )  # fmt: skip
    seconds = time.monotonic() - started

    assert "Traceback" not in done.stderr, done.stderr
    record = json.loads(done.stdout)
    assert (done.returncode, record["status"]) == (9, "llm_error")
    assert record["error"]["code"] == "llm_timeout"
    assert "0.2 s" in record["error"]["message"]
    assert record["http_requests"] == 2  # both tries were sent; neither was answered in time
    # two 0.2 s tries and one backoff of at most ~2 s, plus starting Python on a busy machine
    assert seconds < 60, seconds
    print(f"\nlive timeout: {record['error']['message']} after {seconds:.1f} s")
