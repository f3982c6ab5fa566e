"""Benchmark 5: peak memory of one batch of N questions, results streamed to a JSONL file.

Run: .venv/bin/python benchmarks/memory.py [--quick] [--sizes 100,300,1000] [--k 10]

For each N, a fresh process builds a pipeline on the demo database, answers a warm-up batch of 10
(imports, schema cache, JSON schemas), then runs ``run_batch`` over N distinct generated questions
(the 50 simple ones, then copies with a suffix " [#0001]" ...) with k per call, writing each
result to a JSONL file from ``on_result`` as it arrives. Two processes per N:

- one under ``tracemalloc``: the Python heap's peak during the batch above what was allocated
  before it, and what is still allocated once ``run_batch`` has returned (its list of results
  included) and once that list is dropped;
- one without it (tracemalloc inflates RSS): ``ru_maxrss`` before the batch and at the end.

If memory stayed flat in N, the peak would not grow between N = 300 and N = 1000; the last table
gives the growth per extra question. ``--quick`` runs N = 100 and 300.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _harness as h

from orchestrator.core.result import RunStatus

MIB = 1024 * 1024


def child(n: int, k: int, db: Path, base_url: str, traced: bool) -> dict:
    import tracemalloc

    out_path = Path(tempfile.mkdtemp(prefix="sqlgate-bench-mem-")) / "results.jsonl"
    h.pipeline(db, base_url, k=k).run_batch(h.many_questions(10))  # warm-up
    questions = h.many_questions(n)
    gc.collect()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    p = h.pipeline(db, base_url, k=k)
    answered = 0
    with out_path.open("w", encoding="utf-8") as out:

        def on_result(_index: int, result) -> None:
            nonlocal answered
            answered += result.status == RunStatus.ANSWERED
            out.write(result.model_dump_json() + "\n")

        results = p.run_batch(questions, on_result=on_result)  # streamed: returns []
    seconds = time.perf_counter() - started
    figures = {
        "n": n,
        "answered": answered,
        "lines": sum(1 for _ in out_path.open(encoding="utf-8")),
        "jsonl_bytes": out_path.stat().st_size,
        "llm_calls": p.llm.calls,
        "seconds": seconds,
        "rss_before": rss_before,
        "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if traced:
        current, peak = tracemalloc.get_traced_memory()
        figures.update(traced_peak=peak, traced_after=current)
        del results, p
        gc.collect()
        figures["traced_dropped"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    out_path.unlink()
    out_path.parent.rmdir()
    return figures


def measure(n: int, k: int, db: Path, base_url: str, traced: bool) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(n),
        "--k",
        str(k),
        "--db",
        str(db),
        "--base-url",
        base_url,
    ] + (["--traced"] if traced else [])
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=h.ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"memory child for N={n} failed ({done.returncode}):\n{done.stderr[-3000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 100 and 300 only")
    parser.add_argument("--sizes", default=None, help="comma-separated N (default 100,300,1000)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--db", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--traced", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.k, Path(args.db), args.base_url, args.traced)))
        return

    sizes = [
        int(s) for s in (args.sizes or ("100,300" if args.quick else "100,300,1000")).split(",")
    ]
    h.header(
        f"Benchmark 5: peak memory of one batch of N questions (k = {args.k}), results streamed to JSONL"
    )
    db = h.demo_database()
    rows, growth = [], []
    with h.ScriptedModel(copies=math.ceil(max(sizes) / 50)) as model:
        for n in sizes:
            t = measure(n, args.k, db, model.base_url, traced=True)
            r = measure(n, args.k, db, model.base_url, traced=False)
            rows.append(
                (
                    n,
                    f"{t['answered']}/{n}",
                    t["lines"],
                    f"{t['jsonl_bytes'] / MIB:.1f}",
                    t["llm_calls"],
                    f"{r['seconds']:.1f}",
                    f"{t['traced_peak'] / MIB:.1f}",
                    f"{t['traced_after'] / MIB:.1f}",
                    f"{t['traced_dropped'] / MIB:.2f}",
                    f"{r['rss_before'] / MIB:.0f}",
                    f"{r['rss_peak'] / MIB:.0f}",
                    f"{(r['rss_peak'] - r['rss_before']) / MIB:.1f}",
                )
            )
            growth.append((n, t["traced_peak"], r["rss_peak"] - r["rss_before"]))
    h.table(
        "Peak memory per batch (MiB); one fresh process per figure",
        [
            "N",
            "answered",
            "JSONL lines",
            "JSONL MiB",
            "LLM calls",
            "batch s (untraced)",
            "heap peak",
            "heap after return",
            "heap after dropping results",
            "RSS before",
            "RSS peak",
            "RSS growth",
        ],
        rows,
    )
    h.table(
        "Growth with N (flat would be ~0)",
        [
            "from N",
            "to N",
            "heap peak per extra question (KiB)",
            "RSS growth per extra question (KiB)",
        ],
        [
            (
                a[0],
                b[0],
                f"{(b[1] - a[1]) / (b[0] - a[0]) / 1024:.1f}",
                f"{(b[2] - a[2]) / (b[0] - a[0]) / 1024:.1f}",
            )
            for a, b in zip(growth, growth[1:], strict=False)
        ],
    )
    print(
        "\nheap = Python allocations traced by tracemalloc from the batch's start; RSS = ru_maxrss of an "
        "untraced run (process peak, MiB)."
    )


if __name__ == "__main__":
    main()
