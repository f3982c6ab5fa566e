"""The value index on a 1,000-table database: build time, memory and ranking time with values.

Run: .venv/bin/python benchmarks/value_index.py [--tables 1000] [--rows 1000] [--questions 300]

Builds a SQLite file of ``--tables`` tables (generated, seed 7), each with an integer key, three
label columns of 8, 80 and 600 distinct values, a free-text column of unique sentences (too many
distinct values: skipped), two numbers and a date, ``--rows`` rows each. Then, in a fresh child
process, it reads the schema (``SchemaExplorer``), builds the value index through the engine
(``ValueIndex.build``, default limits) and the schema index, and times ``build_catalogue`` for
value-only questions ("How many are <value>?", a value of one table's 600-value column): the
share whose table was shown, and the ranking time (best of 3 passes). Memory is the child's peak
resident set (``ru_maxrss``) before and after the build, so SQLite's and Python's own memory both
count.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 7


def words(count: int, rng: random.Random) -> list[str]:
    """Distinct pronounceable made-up words (no real vocabulary to favour the ranker)."""
    consonants, vowels = "bcdfghjklmnprstvz", "aeiou"
    out: set[str] = set()
    while len(out) < count:
        n = rng.randint(2, 4)
        out.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
    return sorted(out)


def build_database(path: Path, tables: int, rows: int) -> list[tuple[str, str]]:
    """The database, and (table, value) pairs of the 600-value columns for the questions."""
    rng = random.Random(SEED)
    vocabulary = words(tables * 2 + 4000, rng)
    table_names = [f"{vocabulary[i]}_{vocabulary[i + tables]}" for i in range(tables)]
    vocabulary = vocabulary[tables * 2 :]  # values use other words than the names
    conn = sqlite3.connect(path)
    asked: list[tuple[str, str]] = []
    for t, name in enumerate(table_names):
        labels = [
            [f"{rng.choice(vocabulary).title()} {rng.choice(vocabulary)}" for _ in range(k)]
            for k in (8, 80, 600)
        ]
        conn.execute(
            f'CREATE TABLE "{name}" (id INTEGER PRIMARY KEY, kind TEXT, category TEXT, '
            f"label TEXT, note TEXT, amount REAL, quantity INTEGER, created TEXT"
            + (f", ref_id INTEGER REFERENCES {table_names[t - 1]}(id)" if t % 3 else "")
            + ")"
        )
        data = []
        for r in range(rows):
            data.append(
                (
                    r,
                    rng.choice(labels[0]),
                    rng.choice(labels[1]),
                    rng.choice(labels[2]),
                    f"row {r} of {name}: " + " ".join(rng.choices(vocabulary, k=8)),
                    rng.random() * 1000,
                    rng.randint(0, 50),
                    f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                )
                + ((rng.randint(0, rows - 1),) if t % 3 else ())
            )
        marks = ", ".join("?" * len(data[0]))
        conn.executemany(f'INSERT INTO "{name}" VALUES ({marks})', data)
        asked.append((name, rng.choice([row[3] for row in data])))
    conn.commit()
    conn.close()
    return asked


def measure(path: Path, asked: list[tuple[str, str]]) -> dict[str, object]:
    """Runs in the child: build everything, time ranking, report figures."""
    import sqlalchemy as sa

    from agents.catalogue import build_catalogue
    from agents.linking import SchemaIndex, ValueIndex
    from agents.schema_explorer import SchemaExplorer

    def rss_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    engine = sa.create_engine(f"sqlite:///{path}")
    before = rss_mb()
    started = time.perf_counter()
    tables = SchemaExplorer(engine, cache_key="benchmark-values").tables()
    schema_s = time.perf_counter() - started
    started = time.perf_counter()
    values = ValueIndex.build(engine, tables)
    values_s = time.perf_counter() - started
    started = time.perf_counter()
    index = SchemaIndex(tables)
    index_s = time.perf_counter() - started
    after = rss_mb()
    questions = [(f"How many are {value}?", name) for name, value in asked]
    shown = 0
    for question, name in questions:
        shown += name in build_catalogue([question], tables, index=index, values=values).shown
    best = [float("inf")] * len(questions)
    for _ in range(3):
        for i, (question, _) in enumerate(questions):
            started = time.perf_counter()
            build_catalogue([question], tables, index=index, values=values)
            best[i] = min(best[i], (time.perf_counter() - started) * 1000)
    best.sort()
    return {
        "tables": len(tables),
        "schema_s": schema_s,
        "values_s": values_s,
        "index_s": index_s,
        "values": len(values),
        "columns": values.columns,
        "skipped": values.skipped,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "questions": len(questions),
        "shown": shown,
        "p50_ms": best[len(best) // 2],
        "p90_ms": best[int(0.9 * len(best))],
        "max_ms": best[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        path, asked = Path(args.child[0]), json.loads(Path(args.child[1]).read_text())
        print(json.dumps(measure(path, [tuple(a) for a in asked])))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.sqlite"
        started = time.perf_counter()
        asked = build_database(path, args.tables, args.rows)
        made = time.perf_counter() - started
        rng = random.Random(SEED)
        sample = rng.sample(asked, min(args.questions, len(asked)))
        asked_file = Path(tmp) / "asked.json"
        asked_file.write_text(json.dumps(sample))
        child = subprocess.run(
            [sys.executable, __file__, "--child", str(path), str(asked_file)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(child.stdout.strip().splitlines()[-1])
        size = path.stat().st_size / 1e6
    print(
        f"Value index on {r['tables']:,} tables x {args.rows:,} rows (SQLite file {size:.0f} MB, "
        f"made in {made:.0f} s; fresh process):\n"
        f"  schema read {r['schema_s']:.1f} s; value index built in {r['values_s']:.1f} s "
        f"({r['values']:,} values in {r['columns']:,} columns; {r['skipped']:,} columns skipped "
        f"for too many distinct values); schema index {r['index_s']:.1f} s\n"
        f"  peak resident memory {r['rss_before_mb']:.0f} MB before, {r['rss_after_mb']:.0f} MB "
        f"after the build (+{r['rss_after_mb'] - r['rss_before_mb']:.0f} MB)\n"
        f"  {r['questions']} value-only questions: the table holding the value shown for "
        f"{r['shown']} ({r['shown'] / r['questions']:.1%}); build_catalogue p50 {r['p50_ms']:.2f} ms, "
        f"p90 {r['p90_ms']:.2f} ms, max {r['max_ms']:.2f} ms (best of 3 passes)"
    )


if __name__ == "__main__":
    main()
