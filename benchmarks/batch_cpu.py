"""CPU per question as the schema grows, and the start-up CPU of the commands.

Run: .venv/bin/python benchmarks/batch_cpu.py [--questions 1000] [--profile] [--skip-startup]
     [--tree DIR]   (measure another source tree, e.g. ``git worktree add DIR <commit>``)

Three SQLite databases, each holding the demo's 7 tables (with their data: the questions read
them) and, beside them, empty tables merged from Spider's schemas (``spider_dev/tables.json``,
a table's name prefixed with its database's where two share it):

- the demo alone (7 tables);
- the 20 Spider dev databases (80 tables) and the demo's: 87 tables;
- all 166 Spider databases (873 tables) and the demo's: 880 tables.

(Spider lists 81 and 876; its ``sqlite_sequence`` entries are SQLite's own and are left out.)

On each, ``python -m orchestrator.cli batch --yes`` answers ``--questions`` distinct questions
(k = 10) from the scripted server (``_harness.ScriptedModel``: instant replies, NOT a model);
the figure is the whole process's CPU (user + system, ``getrusage``) divided by the questions.
``--profile`` prints the top functions of the largest schema's batch (cProfile, main thread).

Start-up, each the median of five fresh processes: a bare ``python -c "import openai"``,
``sqlgate --help``, and ``sqlgate ask --yes`` of one question on the demo database (start-up,
the run and the SQLite sandbox it waited for); ask's CPU is then given as a multiple of the bare
``import openai`` measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _harness as h

ROOT = h.ROOT
SPIDER = ROOT.parent / "shared" / "corpora" / "spider_dev"
_TYPES = {"number": "NUMERIC", "time": "TEXT", "boolean": "INTEGER"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def add_spider_tables(database: Path, only_dev: bool) -> int:
    """Create Spider's tables (empty, with their columns, keys and foreign keys) in
    ``database``; returns how many. Names shared by two Spider databases, or with a table
    already there, are prefixed with their Spider database's name."""
    schemas = json.loads((SPIDER / "tables.json").read_text())
    if only_dev:
        dev = {entry["db_id"] for entry in json.loads((SPIDER / "dev.json").read_text())}
        schemas = [s for s in schemas if s["db_id"] in dev]
    with sqlite3.connect(database) as conn:
        taken = {
            row[0].lower()
            for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        owners: dict[str, int] = {}
        for schema in schemas:
            for name in schema["table_names_original"]:
                owners[name.lower()] = owners.get(name.lower(), 0) + 1
        created = 0
        for schema in schemas:
            originals = schema["table_names_original"]
            rename = {}
            for n in originals:
                name = (
                    n
                    if owners[n.lower()] == 1 and n.lower() not in taken
                    else f"{schema['db_id']}_{n}"
                )
                while name.lower() in taken:  # a prefixed name another database already has
                    name += "_"
                taken.add(name.lower())
                rename[n] = name
            columns: list[list[str]] = [[] for _ in originals]
            seen: list[set[str]] = [set() for _ in originals]
            names = schema["column_names_original"]
            for position, (table, column) in enumerate(names):
                if table < 0 or column.lower() in seen[table]:  # Spider repeats a few columns
                    continue
                seen[table].add(column.lower())
                kind = _TYPES.get(schema["column_types"][position], "TEXT")
                key = " PRIMARY KEY" if position in schema["primary_keys"] else ""
                columns[table].append(f"{_quoted(column)} {kind}{key}")
            for source, target in schema["foreign_keys"]:
                (src_table, src_col), (dst_table, dst_col) = names[source], names[target]
                columns[src_table].append(
                    f"FOREIGN KEY ({_quoted(src_col)}) REFERENCES "
                    f"{_quoted(rename[originals[dst_table]])} ({_quoted(dst_col)})"
                )
            for n, original in enumerate(originals):
                if not columns[n] or original.lower().startswith("sqlite_"):  # SQLite's own
                    continue
                conn.execute(f"CREATE TABLE {_quoted(rename[original])} ({', '.join(columns[n])})")
                created += 1
    return created


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


TREE = ROOT  # the source tree measured (--tree)


def _cpu_of(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    before = _children_cpu()
    done = subprocess.run(
        [sys.executable, *args],
        cwd=TREE,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[:4]} exited {done.returncode}: {done.stderr[-2000:]}")
    return _children_cpu() - before, done.stdout


def batch_cpu(db: Path, env: dict[str, str], n: int, profile: Path | None) -> float:
    questions = db.parent / f"questions-{n}.txt"
    questions.write_text("\n".join(h.many_questions(n)) + "\n")
    out = db.parent / f"results-{n}.jsonl"  # a fresh file: an existing one would be resumed
    cli = ["-m", "orchestrator.cli", "batch", str(questions), "--db", f"sqlite:///{db}"]
    cli += ["--out", str(out), "--yes"]
    if profile is not None:
        cli = ["-m", "cProfile", "-o", str(profile), *cli]
    cpu, _ = _cpu_of(cli, env)
    statuses = [json.loads(line)["status"] for line in out.read_text().splitlines()]
    if statuses.count("answered") != n:
        raise RuntimeError(f"{db.name}: {statuses.count('answered')} of {n} answered")
    return cpu / n


def _print_profile(path: Path, n: int, top: int = 15) -> None:
    stats = pstats.Stats(str(path))
    rows = []
    for (file, line, name), (_, calls, own, cumulative, _) in sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda item: -item[1][2],
    )[:top]:
        rows.append(
            [
                f"{name} ({Path(file).name}:{line})",
                f"{calls:,}",
                f"{own / n * 1000:.3f}",
                f"{cumulative / n * 1000:.3f}",
            ]
        )
    h.table(
        f"Top {top} functions by own time, largest schema (main thread, cProfile)",
        ["function", "calls", "own ms/question", "cumulative ms/question"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--skip-startup", action="store_true")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree measured")
    args = parser.parse_args()
    global TREE
    TREE = args.tree.resolve()
    if not (SPIDER / "tables.json").exists():
        sys.exit(f"needs the Spider schemas at {SPIDER}")

    h.header("CPU per question as the schema grows (user + system, getrusage)")
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s)")
    print(f"source tree measured: {TREE}")
    with tempfile.TemporaryDirectory(prefix="sqlgate-batch-cpu-") as tmp:
        work = Path(tmp)
        databases = []
        for label, spider in (("demo", None), ("spider-dev", True), ("spider-all", False)):
            folder = work / label
            folder.mkdir()
            db = h.demo_database(folder)
            added = add_spider_tables(db, only_dev=spider) if spider is not None else 0
            databases.append((label, db, 7 + added))
        rows = []
        with h.ScriptedModel(copies=-(-args.questions // 50)) as model:
            if not args.skip_startup:
                env = _env(work / "state-startup", model.base_url)
                demo = databases[0][1]
                bare, helps, asks = [], [], []
                for round_ in range(5):
                    bare.append(_cpu_of(["-c", "import openai"], env)[0])
                    helps.append(_cpu_of(["-m", "orchestrator.cli", "--help"], env)[0])
                    question = h.many_questions(50)[round_ * 7 % 50]
                    cpu, out = _cpu_of(
                        ["-m", "orchestrator.cli", "ask", question, "--db", f"sqlite:///{demo}"]
                        + ["--yes", "--json"],
                        env,
                    )
                    if json.loads(out)["status"] != "answered":
                        raise RuntimeError(f"ask did not answer: {out[:300]}")
                    asks.append(cpu)
                openai_ms = statistics.median(bare) * 1000
                ask_ms = statistics.median(asks) * 1000
                h.table(
                    "Start-up CPU (median of 5 fresh processes)",
                    ["command", "CPU ms", "× import openai"],
                    [
                        ['python -c "import openai"', f"{openai_ms:.0f}", "1.00"],
                        ["sqlgate --help", f"{statistics.median(helps) * 1000:.0f}", ""],
                        ["sqlgate ask --yes (demo)", f"{ask_ms:.0f}", f"{ask_ms / openai_ms:.2f}"],
                    ],
                )
            for label, db, tables in databases:
                state = work / f"state-{label}"
                state.mkdir()
                last = label == databases[-1][0]
                profile = work / "batch.prof" if args.profile and last else None
                per = batch_cpu(db, _env(state, model.base_url), args.questions, profile)
                rows.append([label, f"{tables}", f"{per * 1000:.1f}"])
        h.table(
            f"batch of {args.questions:,} questions: CPU per question",
            ["database", "tables", "CPU ms/question"],
            rows,
        )
        if args.profile:
            _print_profile(work / "batch.prof", args.questions)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
