"""Run sqlgate's benchmarks one after the other, each printing its own figures.

Run: .venv/bin/python benchmarks/run_all.py [--quick] [--only NAME[,NAME...]] [--with-others] [--list]

By default the five of the batching issue run, in order: ``calls`` (LLM calls per question,
alone and batched), ``throughput`` (questions per simulated minute under 5 requests / 60 s),
``prompt_size`` (Batch-1 prompt on a 300-table schema), ``overhead`` (orchestrator time per
question against the SQL alone) and ``memory`` (peak memory for 100, 300 and 1,000 questions).
``--with-others`` adds the others (``safety``, ``approvals``, ``cpu``,
``ratelimit``). ``--quick`` passes each script its shorter setting. Every script runs in its own
process with this interpreter; a failing one is reported and the others still run. The exit
status is 0 only when every script that ran exited 0.

No benchmark talks to a live model: the pipeline benchmarks use the project's scripted
OpenAI-compatible server (tests/scripted_llm), and the others no model at all.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    what: str
    args: list[str] = field(default_factory=list)
    quick: list[str] = field(default_factory=list)
    other: bool = False  # not one of the five; runs with --with-others or --only


BENCHMARKS = [
    Benchmark(
        "calls",
        "pipeline_calls.py",
        "1. LLM calls: single questions and 50 batched (k=10) vs alone",
        quick=["--quick"],
    ),
    Benchmark(
        "throughput",
        "throughput.py",
        "2. questions per simulated minute under 5 requests / 60 s",
        quick=["--quick"],
    ),
    Benchmark(
        "prompt_size", "prompt_size.py", "3. Batch-1 prompt size on the 300-table ERP schema"
    ),
    Benchmark(
        "overhead",
        "overhead.py",
        "4. orchestrator overhead per question vs the SQL alone",
        quick=["--quick"],
    ),
    Benchmark(
        "memory",
        "memory.py",
        "5. peak memory for batches of 100, 300, 1,000 questions",
        quick=["--quick"],
    ),
    Benchmark(
        "safety",
        "safety_validator.py",
        "validator throughput and false positives",
        quick=["--rounds", "1"],
        other=True,
    ),
    Benchmark(
        "approvals",
        "approvals_gate.py",
        "approval gate: decision to resumed run by wake path, beside LangGraph; listing pending",
        quick=["--rounds", "50", "--pending", "2000"],
        other=True,
    ),
    Benchmark(
        "telemetry",
        "telemetry_overhead.py",
        "CPU per question with traces off and on",
        quick=["--rounds", "2", "--batch", "20"],
        other=True,
    ),
    Benchmark(
        "cpu",
        "cpu_per_question.py",
        "start-up, ask, API and batch CPU per question; top functions",
        quick=["--quick"],
        other=True,
    ),
    Benchmark(
        "batch_cpu",
        "batch_cpu.py",
        "CPU per question of a batch on 7, 87 and 880 tables; start-up beside import openai",
        quick=["--questions", "100"],
        other=True,
    ),
    Benchmark(
        "ratelimit",
        "ratelimit_bench.py",
        "sliding-window limiter overhead and exactness",
        quick=["--quick"],
        other=True,
    ),
    Benchmark(
        "run_identity",
        "run_identity.py",
        "binding a run to its database: the identity check and schema read per resume",
        quick=["--repeat", "20"],
        other=True,
    ),
    Benchmark(
        "eval_spider",
        "eval_spider.py",
        "sqlgate eval on Spider dev (scripted gold SQL): record, replay, same report",
        quick=["--per-db", "1"],
        other=True,
    ),
]


def select(only: str | None, with_others: bool) -> list[Benchmark]:
    if only:
        wanted = [w.strip() for w in only.split(",") if w.strip()]
        by_name = {b.name: b for b in BENCHMARKS} | {
            b.script.removesuffix(".py"): b for b in BENCHMARKS
        }
        unknown = [w for w in wanted if w.removesuffix(".py") not in by_name]
        if unknown:
            raise SystemExit(
                f"unknown benchmark(s): {', '.join(unknown)}; known: "
                f"{', '.join(b.name for b in BENCHMARKS)}"
            )
        return [by_name[w.removesuffix(".py")] for w in wanted]
    return [b for b in BENCHMARKS if with_others or not b.other]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter settings for every script")
    parser.add_argument("--only", default=None, help="comma-separated names (see --list)")
    parser.add_argument(
        "--with-others", action="store_true", help="also the safety, approvals and ratelimit ones"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args()

    if args.list:
        for b in BENCHMARKS:
            present = "" if (HERE / b.script).is_file() else "  (missing)"
            print(f"{b.name:12s} {b.script:22s} {b.what}{present}")
        return

    outcomes: list[tuple[str, str, float]] = []
    for b in select(args.only, args.with_others):
        path = HERE / b.script
        command = [sys.executable, str(path)] + (b.quick if args.quick else b.args)
        shown = " ".join([Path(sys.executable).name, "benchmarks/" + b.script] + command[2:])
        print(
            f"\n{'#' * 78}\n# {b.name}: {b.what}\n# $ {shown}\n{'#' * 78}",
            flush=True,
        )
        if not path.is_file():
            outcomes.append((b.name, "missing", 0.0))
            print(f"{b.script} does not exist; skipped.")
            continue
        started = time.perf_counter()
        code = subprocess.call(command, cwd=ROOT)
        seconds = time.perf_counter() - started
        outcomes.append((b.name, "ok" if code == 0 else f"FAILED (exit {code})", seconds))

    print(f"\n{'#' * 78}\nSummary")
    for name, status, seconds in outcomes:
        print(f"  {name:12s} {status:18s} {seconds:7.1f} s")
    sys.exit(0 if all(s in ("ok", "missing") for _, s, _ in outcomes) else 1)


if __name__ == "__main__":
    main()
