"""Benchmark: reviewed-SQL memory retrieval on Spider dev — recall of same-template examples, and
latency with 10,000 stored pairs.

Run: .venv/bin/python benchmarks/memory_retrieval.py [--size 10000] [--postgres URL]

Recall. Spider dev has groups of questions on the same database with the same gold SQL. For each
group the first question is stored (with its gold SQL, as an approved example of its database)
and every other question of the group is asked: a hit at k is an example among the top k whose
template fingerprint equals that of the asked question's gold SQL. Two memories:

- ``pairs only``: memory holds just the stored half of each group (the issue's setting);
- ``with distractors``: it also holds every other dev question of the database (all 1,034
  questions minus the asked ones), so similar-but-different questions compete.

Latency. One database holding ``--size`` stored pairs: the stored Spider questions, the rest of
Spider dev, then real human-written questions of text2sql-data (ATIS, Advising, GeoQuery, ...)
with their SQL, up to the size. Each asked Spider question is retrieved through
``ReviewMemory.examples_for`` (full-text query, ranking, budget), as Batch 2 does; p50/p95/p99
over every call after a warm-up. The state database is a SQLite file (WAL), as by default; with
``--postgres URL`` the same runs on a fresh PostgreSQL database too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from orchestrator.core.state_db import StateDatabase  # noqa: E402
from orchestrator.features.memory import (  # noqa: E402
    MemoryScope,
    MemorySettings,
    MemoryStore,
    ReviewMemory,
    template_of,
)

CORPORA = ROOT.parent / "shared" / "corpora"
SETTINGS = MemorySettings(examples_per_question=3, example_tokens=100_000, candidates=12)


def spider_groups(dev: list[dict]) -> list[list[dict]]:
    """Groups (same database, same gold SQL text) of two or more dev questions."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for entry in dev:
        groups[(entry["db_id"], " ".join(entry["query"].split()).lower())].append(entry)
    return [g for g in groups.values() if len(g) > 1]


def scope(name: str) -> MemoryScope:
    return MemoryScope(database=name, dialect="sqlite", schema={}, schema_fp="-", policy_fp="-")


def recall(
    memory: ReviewMemory, dev: list[dict], groups: list[list[dict]], distractors: bool
) -> dict:
    asked = {id(e) for g in groups for e in g[1:]}
    for g in groups:
        memory.record(
            scope(g[0]["db_id"]),
            question=g[0]["question"],
            sql=g[0]["query"],
            status="approved",
            reviewers=["spider"],
        )
    if distractors:
        stored = {id(g[0]) for g in groups}
        for e in dev:
            if id(e) not in asked and id(e) not in stored:
                memory.record(
                    scope(e["db_id"]),
                    question=e["question"],
                    sql=e["query"],
                    status="approved",
                    reviewers=["spider"],
                )
    hits1 = hits3 = total = 0
    for g in groups:
        for e in g[1:]:
            want = template_of(e["query"], "sqlite").template_id
            found = memory.examples_for(scope(e["db_id"]), e["question"])
            templates = [x.template_id for x in found]
            hits1 += want in templates[:1]
            hits3 += want in templates[:3]
            total += 1
    return {"queries": total, "recall@1": hits1 / total, "recall@3": hits3 / total}


def text2sql_pairs() -> list[tuple[str, str]]:
    pairs = []
    for path in sorted((CORPORA / "text2sql_data").glob("*.json")):
        for entry in json.loads(path.read_text()):
            sql = entry["sql"][0]
            for sentence in entry["sentences"]:
                text, sql_text = sentence["text"], sql
                for name, value in sentence["variables"].items():
                    text = text.replace(name, value)
                    sql_text = sql_text.replace(name, value)
                pairs.append((text, sql_text))
    return pairs


def fill(memory: ReviewMemory, size: int, dev: list[dict], groups: list[list[dict]]) -> float:
    """One database with ``size`` stored pairs; returns the seconds the recording took."""
    asked = {id(e) for g in groups for e in g[1:]}
    pairs = [(g[0]["question"], g[0]["query"]) for g in groups]
    stored = {id(g[0]) for g in groups}
    pairs += [
        (e["question"], e["query"]) for e in dev if id(e) not in asked and id(e) not in stored
    ]
    pairs += text2sql_pairs()
    if len(pairs) < size:
        raise SystemExit(f"only {len(pairs)} real pairs available for --size {size}")
    started = time.perf_counter()
    for question, sql in pairs[:size]:
        memory.record(
            scope("bench"), question=question, sql=sql, status="approved", reviewers=["bench"]
        )
    return time.perf_counter() - started


def latency(memory: ReviewMemory, groups: list[list[dict]], rounds: int) -> dict:
    questions = [e["question"] for g in groups for e in g[1:]]
    for q in questions[:50]:
        memory.examples_for(scope("bench"), q)  # warm-up
    times = []
    for _ in range(rounds):
        for q in questions:
            started = time.perf_counter()
            memory.examples_for(scope("bench"), q)
            times.append((time.perf_counter() - started) * 1000.0)
    times.sort()
    pick = lambda p: times[min(len(times) - 1, int(p * len(times)))]  # noqa: E731
    return {
        "calls": len(times),
        "p50_ms": pick(0.50),
        "p95_ms": pick(0.95),
        "p99_ms": pick(0.99),
        "max_ms": times[-1],
        "mean_ms": statistics.fmean(times),
    }


def run(
    url: str, label: str, dev: list[dict], groups: list[list[dict]], size: int, rounds: int
) -> None:
    for distractors in (False, True):
        state = StateDatabase(url)
        state.setup()
        memory = ReviewMemory(MemoryStore(state.engine), SETTINGS)
        r = recall(memory, dev, groups, distractors)
        what = "with distractors" if distractors else "pairs only"
        print(
            f"{label} recall ({what}, {r['queries']} queries): recall@1 {r['recall@1']:.1%}, "
            f"recall@3 {r['recall@3']:.1%}"
        )
        _reset(state)
    state = StateDatabase(url)
    state.setup()
    memory = ReviewMemory(MemoryStore(state.engine), MemorySettings())
    seconds = fill(memory, size, dev, groups)
    n = len(memory.store.examples(database="bench"))
    print(
        f"{label}: {n} pairs stored in one database in {seconds:.1f} s "
        f"({seconds / n * 1000:.2f} ms per recorded statement, fingerprint included)"
    )
    lat = latency(memory, groups, rounds)
    print(
        f"{label} retrieval latency at {n} pairs ({lat['calls']} calls, default settings): "
        f"p50 {lat['p50_ms']:.2f} ms, p95 {lat['p95_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, "
        f"max {lat['max_ms']:.2f} ms (target p95 < 20 ms on SQLite)"
    )
    _reset(state)


def _reset(state: StateDatabase) -> None:
    with state.engine.begin() as conn:
        for table in (
            "sqlgate_memory_examples",
            "sqlgate_memory_notes",
            "sqlgate_memory_revocations",
        ):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    state.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="stored pairs for the latency run")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the asked questions")
    parser.add_argument("--postgres", help="also run on a fresh database of this PostgreSQL server")
    args = parser.parse_args()
    dev_path = CORPORA / "spider_dev" / "dev.json"
    if not dev_path.is_file():
        raise SystemExit(f"{dev_path} is absent: the benchmark needs the Spider dev corpus")
    dev = json.loads(dev_path.read_text())
    groups = spider_groups(dev)
    print(
        f"Spider dev: {len(dev)} questions, {len(groups)} groups sharing a gold SQL, "
        f"{sum(len(g) - 1 for g in groups)} asked questions"
    )
    with tempfile.TemporaryDirectory() as folder:
        run(
            f"sqlite:///{Path(folder) / 'state.sqlite'}",
            "SQLite",
            dev,
            groups,
            args.size,
            args.rounds,
        )
    if args.postgres:
        name = f"sqlgate_bench_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(args.postgres, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        try:
            url = (
                sa.make_url(args.postgres).set(database=name).render_as_string(hide_password=False)
            )
            run(url, "PostgreSQL", dev, groups, args.size, args.rounds)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.dispose()


if __name__ == "__main__":
    main()
