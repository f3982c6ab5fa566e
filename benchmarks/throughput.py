"""Benchmark 2: questions answered per simulated minute under the seed's limit of 5 requests / 60 s.

Run: .venv/bin/python benchmarks/throughput.py [--quick] [--sizes 50,200] [--k 10]

The limiter is the real ``SlidingWindowLimiter(limit=5, window=60)`` in wait mode on a
``ManualClock``: its sleep advances the virtual clock, so a wait of a minute takes no real time,
and the scripted model answers instantly, so the virtual clock measures the limit alone. For N
generated simple questions it compares one ``run_batch`` with k per call against N ``ask`` calls
one after the other (same pipeline, same limiter), and prints:

- simulated time from the start to the last answer, and questions per simulated minute over it;
- the same over whole windows used (requests / 5, rounded up, in minutes): the steady-state rate,
  which does not credit the first window's burst of 5 free requests;
- when the first answer arrived (a batch answers nothing until its last stage).

Target: batched at least 10x one-at-a-time. ``--quick`` runs N = 50 only.
"""

from __future__ import annotations

import argparse
import math

import _harness as h

from orchestrator.core.result import RunStatus
from ratelimit import ManualClock

LIMIT, WINDOW = 5, 60.0


def run(db, base_url: str, questions: list[str], k: int, batched: bool) -> dict:
    clock = ManualClock()
    p = h.pipeline(db, base_url, k=k, limiter=h.seed_limiter(clock), sleep=clock.sleep)
    finished: list[float] = []
    answered = 0
    if batched:

        def on_result(_index, result) -> None:
            nonlocal answered
            finished.append(clock())
            answered += result.status == RunStatus.ANSWERED

        p.run_batch(questions, on_result=on_result)
    else:
        for q in questions:
            answered += p.ask(q).status == RunStatus.ANSWERED
            finished.append(clock())
    elapsed = clock()
    requests = p.llm.http_requests
    windows = math.ceil(requests / LIMIT)
    return {
        "answered": answered,
        "requests": requests,
        "elapsed_s": elapsed,
        "per_min": answered / (elapsed / 60.0) if elapsed else float("inf"),
        "windows": windows,
        "steady_per_min": answered / (windows * WINDOW / 60.0),
        "first_s": min(finished) if finished else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 50 only")
    parser.add_argument("--sizes", default=None, help="comma-separated N (default 50,200)")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    sizes = [int(s) for s in (args.sizes or ("50" if args.quick else "50,200")).split(",")]

    h.header(
        f"Benchmark 2: throughput under the seed's limit ({LIMIT} requests per {WINDOW:g} s, virtual clock)"
    )
    db = h.demo_database()
    rows, ratios = [], []
    with h.ScriptedModel(copies=math.ceil(max(sizes) / 50)) as model:
        for n in sizes:
            questions = h.many_questions(n)
            alone = run(db, model.base_url, questions, args.k, batched=False)
            batch = run(db, model.base_url, questions, args.k, batched=True)
            for label, m in (("one at a time", alone), (f"run_batch, k = {args.k}", batch)):
                rows.append(
                    (
                        n,
                        label,
                        f"{m['answered']}/{n}",
                        m["requests"],
                        f"{m['elapsed_s'] / 60:.1f}",
                        f"{m['per_min']:.2f}",
                        m["windows"],
                        f"{m['steady_per_min']:.2f}",
                        f"{m['first_s'] / 60:.1f}",
                    )
                )
            ratios.append(
                (
                    n,
                    batch["per_min"] / alone["per_min"],
                    batch["steady_per_min"] / alone["steady_per_min"],
                )
            )
    h.table(
        "Questions per simulated minute",
        [
            "N",
            "mode",
            "answered",
            "LLM requests",
            "to last answer (min)",
            "q/min",
            "windows used",
            "q/min (whole windows)",
            "first answer (min)",
        ],
        rows,
    )
    h.table(
        "Batched / one at a time (target >= 10x)",
        ["N", "to last answer", "whole windows", "target met"],
        [
            (n, f"{a:.1f}x", f"{b:.1f}x", "yes" if min(a, b) >= 10 - 1e-9 else "NO")
            for n, a, b in ratios
        ],
    )
    print(
        "\nThe clock is virtual: waits cost no real time; the model is scripted and instant, so "
        "the rate limit alone sets these figures."
    )


if __name__ == "__main__":
    main()
