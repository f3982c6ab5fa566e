"""Benchmark 1: LLM calls per question, alone and batched (k questions per call).

Run: .venv/bin/python benchmarks/pipeline_calls.py [--quick] [--n 50] [--k 10]

Counts come from the client (``LLMClient.calls``: logical calls; ``http_requests``: HTTP requests,
retries and repairs included), cross-checked with the requests the scripted server answered.
First the seed's single-question scenarios against their design budgets (simple 3, meta 2, one
correction 4, two corrections 5, unresolved ambiguity 1); then N generated simple questions as one
batch with k per call against the same N questions asked one at a time (target: at most 16 calls
for 50 questions with k = 10, against 150), and the same batch size with two questions that need
one and two corrections (corrections are batched too: two more calls). ``--quick`` uses 20
questions.
"""

from __future__ import annotations

import argparse
import math
import time

import _harness as h

from orchestrator.core.result import RunStatus
from tests.scripted_llm.scenarios import (
    AMBIGUOUS,
    ORDERS_BY_SEGMENT,
    SALES_BY_REGION,
    TABLES_META,
    TOP_CATEGORIES,
)

SINGLE = [
    ("simple data question", TOP_CATEGORIES, 3),
    ("meta question", TABLES_META, 2),
    ("one correction", ORDERS_BY_SEGMENT, 4),
    ("two corrections", SALES_BY_REGION, 5),
    ("unresolved ambiguity", AMBIGUOUS, 1),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 questions instead of 50")
    parser.add_argument("--n", type=int, default=None, help="questions in the batch (default 50)")
    parser.add_argument("--k", type=int, default=10, help="questions per LLM call in the batch")
    args = parser.parse_args()
    n = args.n or (20 if args.quick else 50)
    k = args.k

    h.header("Benchmark 1: LLM calls per question, alone and batched")
    db = h.demo_database()
    with h.ScriptedModel() as model:
        rows = []
        for label, question, budget in SINGLE:
            p = h.pipeline(db, model.base_url, k=k)
            r = p.ask(question)
            rows.append(
                (
                    label,
                    r.status.value,
                    p.llm.calls,
                    p.llm.http_requests,
                    budget,
                    "yes" if p.llm.calls == budget else "NO",
                )
            )
        h.table(
            "Single questions (one run each)",
            ["scenario", "status", "LLM calls", "HTTP requests", "design budget", "on budget"],
            rows,
        )

        questions = h.GENERATED_QUESTIONS[:n] if n <= 50 else h.many_questions(n)
        started = time.perf_counter()
        batch = h.pipeline(db, model.base_url, k=k)
        results = batch.run_batch(questions)
        batch_s = time.perf_counter() - started
        batch_ok = sum(r.status == RunStatus.ANSWERED for r in results)

        # the same batch size with two questions that need corrections (one and two rounds)
        mixed = (
            h.GENERATED_QUESTIONS[: n // 2 - 1]
            + [ORDERS_BY_SEGMENT]
            + h.GENERATED_QUESTIONS[n // 2 - 1 : n - 2]
            + [SALES_BY_REGION]
        )
        corrected = h.pipeline(db, model.base_url, k=k)
        mixed_results = corrected.run_batch(mixed)
        mixed_ok = sum(r.status == RunStatus.ANSWERED for r in mixed_results)

        started = time.perf_counter()
        alone_calls = alone_http = alone_ok = 0
        for q in questions:
            p = h.pipeline(db, model.base_url, k=k)
            r = p.ask(q)
            alone_calls += p.llm.calls
            alone_http += p.llm.http_requests
            alone_ok += r.status == RunStatus.ANSWERED
        alone_s = time.perf_counter() - started
    target = 3 * math.ceil(n / k) + 1
    h.table(
        f"{n} simple questions (no corrections): one batch with k = {k} against {n} single-question runs",
        ["run", "answered", "LLM calls", "HTTP requests", "calls / question", "wall time (s)"],
        [
            (
                f"run_batch, k = {k}",
                f"{batch_ok}/{n}",
                batch.llm.calls,
                batch.llm.http_requests,
                f"{batch.llm.calls / n:.2f}",
                f"{batch_s:.2f}",
            ),
            (
                f"{n} x ask()",
                f"{alone_ok}/{n}",
                alone_calls,
                alone_http,
                f"{alone_calls / n:.2f}",
                f"{alone_s:.2f}",
            ),
        ],
    )
    h.table(
        f"The same batch size with 2 of the {n} questions needing corrections (1 and 2 rounds)",
        ["run", "answered", "LLM calls", "HTTP requests", "expected"],
        [
            (
                f"run_batch, k = {k}",
                f"{mixed_ok}/{n}",
                corrected.llm.calls,
                corrected.llm.http_requests,
                f"{3 * math.ceil(n / k)} + 2 correction rounds = {3 * math.ceil(n / k) + 2}",
            )
        ],
    )
    print(
        f"\nTarget: batch <= {target} calls (3·⌈{n}/{k}⌉ = {3 * math.ceil(n / k)}) against {3 * n} alone; "
        f"measured {batch.llm.calls} against {alone_calls} ({alone_calls / batch.llm.calls:.1f}x fewer) -> "
        f"{'met' if batch.llm.calls <= target else 'NOT met'}."
    )
    client_side = (
        sum(r[3] for r in rows) + batch.llm.http_requests + corrected.llm.http_requests + alone_http
    )
    print(
        f"Cross-check: the scripted server answered {model.served} requests; the clients counted {client_side}."
    )


if __name__ == "__main__":
    main()
