"""sqlgate's own CPU per question: start-up, ``ask``, the Python API and ``batch``.

Run: .venv/bin/python benchmarks/cpu_per_question.py [--quick] [--baseline DIR] [--top N]

The model is the scripted server (``_harness.ScriptedModel``): it answers at once, so what is
measured is sqlgate's own work. CPU is user + system time, read with ``getrusage``:

- ``sqlgate --version`` and ``--help``: a fresh interpreter each, the median of five;
- ``ask``: ``python -m orchestrator.cli ask --yes --json`` on the demo database, one fresh
  process per question (start-up, the run, and the SQLite sandbox workers it waited for);
- the API: ``Pipeline.ask`` in one process, after one warm-up question;
- ``batch``: ``python -m orchestrator.cli batch --yes`` of 100 and 1,000 distinct questions
  (k = 10), the whole process divided by the questions;
- the top functions of the 1,000-question batch by own time (``cProfile``, main thread).

``--baseline DIR`` measures the same commands a second time on another source tree (for
example ``git archive <commit> | tar -x -C DIR``), interleaved with this one, so both sides see
the same load; the last column is this tree's CPU as a share of the baseline's.

Child processes run with ``SQLGATE_STATE_DIR`` and ``SQLGATE_MEMORY`` as set here (a fresh
state folder; memory on, the default), and a rate limit that never waits.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _api_child(db: str, base_url: str, model: str, questions_file: str) -> None:
    """In a child process run from the tree being measured: CPU per warm ``Pipeline.ask``."""
    sys.path.insert(0, os.getcwd())
    from approvals import ApproveAll
    from orchestrator.core.database import TargetDatabase
    from orchestrator.core.llm import LLMClient, LLMSettings
    from orchestrator.core.pipeline import Pipeline
    from orchestrator.wiring import run_hooks
    from ratelimit import SlidingWindowLimiter

    questions = Path(questions_file).read_text().splitlines()
    llm = LLMClient(
        LLMSettings(model=model, base_url=base_url),
        limiter=SlidingWindowLimiter(limit=1_000_000, window=1.0, mode="wait"),
    )
    pipeline = Pipeline(TargetDatabase(f"sqlite:///{db}"), llm, ApproveAll(), hooks=run_hooks())
    pipeline.ask(questions[0])  # warm-up: schema read, sandbox started
    started = time.process_time()
    statuses = [pipeline.ask(q).status.value for q in questions[1:]]
    cpu = time.process_time() - started
    n = len(questions) - 1
    print(json.dumps({"cpu": cpu, "n": n, "answered": statuses.count("answered")}))


if __name__ == "__main__" and sys.argv[1:2] == ["--api-child"]:
    _api_child(*sys.argv[2:6])
    sys.exit(0)

import _harness as h  # noqa: E402

ROOT = h.ROOT


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _env(state: Path, base_url: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SQLGATE_", "OPENAI_", "PYTHON"))
    }
    env.update(
        SQLGATE_STATE_DIR=str(state),
        SQLGATE_MODEL=h.SCRIPTED_MODEL,
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="not-needed",
        SQLGATE_RATE_LIMIT="1000000/1",  # never waits: the model is instant here
    )
    return env


def _run(tree: Path, args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """CPU seconds of ``python -m orchestrator.cli ARGS`` run from ``tree`` (and its output)."""
    before = _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    cpu = _children_cpu() - before
    if done.returncode not in (0, 13):
        raise RuntimeError(f"{args[:2]} in {tree} exited {done.returncode}: {done.stderr[-2000:]}")
    return cpu, done.stdout


def _api(tree: Path, db: Path, base_url: str, env: dict[str, str], n: int, work: Path) -> float:
    questions = work / f"api{n}.txt"
    questions.write_text("\n".join(h.many_questions(n + 1)) + "\n")
    script = str(Path(__file__).resolve())
    done = subprocess.run(
        [
            sys.executable,
            script,
            "--api-child",
            str(db),
            base_url,
            h.SCRIPTED_MODEL,
            str(questions),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["answered"] != n:
        raise RuntimeError(f"API: {figures['answered']} of {n} answered")
    return float(figures["cpu"]) / n


def _batch(tree: Path, db: Path, env: dict[str, str], n: int, work: Path) -> float:
    questions = work / f"q{n}.txt"
    questions.write_text("\n".join(h.many_questions(n)) + "\n")
    out = work / f"r{n}-{tree.name}-{time.monotonic_ns()}.jsonl"
    cpu, _ = _run(
        tree,
        ["batch", str(questions), "--db", f"sqlite:///{db}", "--out", str(out), "--yes"],
        env,
    )
    lines = out.read_text().splitlines()
    answered = sum(1 for line in lines if json.loads(line)["status"] == "answered")
    if answered != n:
        raise RuntimeError(f"batch {n}: {answered} answered")
    return cpu / n


def _profile(db: Path, env: dict[str, str], n: int, work: Path, top: int) -> None:
    questions = work / f"p{n}.txt"
    questions.write_text("\n".join(h.many_questions(n)) + "\n")
    prof = work / "batch.prof"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            str(prof),
            "-m",
            "orchestrator.cli",
            "batch",
            str(questions),
            "--db",
            f"sqlite:///{db}",
            "--out",
            str(work / "profiled.jsonl"),
            "--yes",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=1800,
        check=True,
    )
    stats = pstats.Stats(str(prof))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (path, line, name), (_, calls, own, cumulative, _) in sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda item: -item[1][2],
    )[:top]:
        where = f"{Path(path).name}:{line}" if line else path
        rows.append(
            [
                f"{name} ({where})",
                f"{calls:,}",
                f"{own / n * 1000:.3f}",
                f"{cumulative / n * 1000:.3f}",
            ]
        )
    h.table(
        f"Top {top} functions by own time, batch of {n} (main thread; cProfile total {total:.1f} s, "
        "profiling slows everything)",
        ["function", "calls", "own ms/question", "cumulative ms/question"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; batch of 100 only")
    parser.add_argument("--baseline", type=Path, help="another source tree to measure beside")
    parser.add_argument("--top", type=int, default=15, help="functions in the profile table")
    args = parser.parse_args()

    trees = [("this tree", ROOT)] + (
        [("baseline", args.baseline.resolve())] if args.baseline else []
    )
    h.header("sqlgate's own CPU per question (user + system, getrusage)")
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s)")
    asks = 2 if args.quick else 5
    batches = [100] if args.quick else [100, 1000]
    figures: dict[str, dict[str, list[float]]] = {name: {} for name, _ in trees}

    with tempfile.TemporaryDirectory(prefix="sqlgate-cpu-") as tmp:
        work = Path(tmp)
        db = h.demo_database(work)
        with h.ScriptedModel(copies=20) as model:
            for round_ in range(asks):
                for name, tree in trees:
                    state = work / f"state-{name.replace(' ', '-')}-{round_}"
                    state.mkdir()
                    env = _env(state, model.base_url)
                    got = figures[name]
                    for flag in ("--version", "--help"):
                        got.setdefault(f"sqlgate {flag}", []).append(_run(tree, [flag], env)[0])
                    question = h.many_questions(50)[round_ * 7 % 50]
                    cpu, out = _run(
                        tree,
                        ["ask", question, "--db", f"sqlite:///{db}", "--yes", "--json"],
                        env,
                    )
                    if json.loads(out)["status"] != "answered":
                        raise RuntimeError(f"ask did not answer: {out[:500]}")
                    got.setdefault("ask (one process per question)", []).append(cpu)
            for name, tree in trees:
                env = _env(work / f"state-{name.replace(' ', '-')}-api", model.base_url)
                figures[name]["API (Pipeline.ask, warm)"] = [
                    _api(tree, db, model.base_url, env, 20 if args.quick else 50, work)
                ]
            for n in batches:
                for name, tree in trees:
                    state = work / f"state-{name.replace(' ', '-')}-batch{n}"
                    state.mkdir()
                    figures[name][f"batch of {n:,} (per question)"] = [
                        _batch(tree, db, _env(state, model.base_url), n, work)
                    ]
            state = work / "state-profile"
            state.mkdir()
            _profile(db, _env(state, model.base_url), batches[-1], work, args.top)

    rows = []
    for what in figures["this tree"]:
        ours = statistics.median(figures["this tree"][what])
        row = [what, f"{ours * 1000:.1f}"]
        if args.baseline:
            base = statistics.median(figures["baseline"][what])
            row += [f"{base * 1000:.1f}", f"{ours / base * 100:.0f} %"]
        rows.append(row)
    headers = ["what", "CPU ms (median)"]
    if args.baseline:
        headers += ["baseline CPU ms", "this / baseline"]
    h.table("CPU per command or question", headers, rows)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
