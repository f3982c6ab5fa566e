"""Value-only questions about values in columns too large to index: found at ask time?

Run: nice -n 10 python benchmarks/value_lookup.py [--tables 200] [--wide 20] [--rows 5000]
         [--questions 300] [--budget 0.25]

A generated SQLite database of ``--tables`` tables (the value index's usual label columns of 8 and
80 values, a number and a date), ``--wide`` of which also hold a column of ``--rows`` distinct
people's names (more than the index keeps, so only the ask-time search can find them). Each
question names one stored person and nothing else ("Tell me everything about Roni Kessler."):
it reports how often the catalogue shows the table holding that person, how long
``build_catalogue`` took (search included), and how often the time budget ran out.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from agents.catalogue import build_catalogue  # noqa: E402
from agents.linking import SchemaIndex, ValueIndex, ValueLimits  # noqa: E402
from agents.schema_explorer import SchemaExplorer  # noqa: E402

SYLLABLES = ["ro", "ni", "kes", "ler", "ma", "ta", "vo", "lin", "dre", "su", "qua", "zen", "pe"]


def person(rng: random.Random) -> str:
    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()

    return f"{word()} {word()}"


def build(path: Path, tables: int, wide: int, rows: int, rng: random.Random) -> dict[str, str]:
    """The database; returns person -> the table holding them (each person in one table)."""
    conn = sqlite3.connect(path)
    where: dict[str, str] = {}
    for t in range(tables):
        name = f"t{t:04d}_record"
        columns = "id INTEGER PRIMARY KEY, kind TEXT, grade TEXT, amount REAL, seen DATE"
        if t < wide:
            columns += ", holder_name TEXT"
        conn.execute(f"CREATE TABLE {name} ({columns})")
        data = []
        for i in range(rows if t < wide else 200):
            row = [i, f"kind {i % 8}", f"grade {i % 80}", i * 1.5, "2024-01-01"]
            if t < wide:
                who = person(rng)
                while who in where:
                    who = person(rng)
                where[who] = name
                row.append(who)
            data.append(row)
        marks = ", ".join("?" * len(data[0]))
        conn.executemany(f"INSERT INTO {name} VALUES ({marks})", data)
    conn.commit()
    conn.close()
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--wide", type=int, default=20)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--budget", type=float, default=ValueLimits().search_s)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        where = build(Path(tmp) / "people.sqlite", args.tables, args.wide, args.rows, rng)
        engine = sa.create_engine(f"sqlite:///{Path(tmp) / 'people.sqlite'}")
        try:
            tables = SchemaExplorer(engine, cache_key="bench-value-lookup").tables()
            started = time.perf_counter()
            values = ValueIndex.build(engine, tables, limits=ValueLimits(search_s=args.budget))
            built = time.perf_counter() - started
            index = SchemaIndex(tables)
            asked = rng.sample(sorted(where), args.questions)
            shown = named = 0
            times: list[float] = []
            for who in asked:
                started = time.perf_counter()
                cat = build_catalogue(
                    [f"Tell me everything about {who}."], tables, index=index, values=values
                )
                times.append((time.perf_counter() - started) * 1000)
                shown += where[who] in cat.shown
                named += where[who] in cat.shown or where[who] in cat.named
        finally:
            engine.dispose()
    times.sort()
    print(
        f"{args.tables} tables, {args.wide} with a column of {args.rows:,} distinct names; value "
        f"index {len(values):,} values in {values.columns} columns, {len(values.wide)} columns "
        f"left to the ask-time search, built in {built:.1f} s; budget {args.budget:.2f} s"
    )
    print(
        f"value-only questions about a name in such a column: table shown {shown}/{len(asked)} "
        f"= {shown / len(asked):.1%} (shown or named {named / len(asked):.1%}); "
        f"build_catalogue p50 {statistics.median(times):.1f} ms, "
        f"p90 {times[int(0.9 * len(times))]:.1f} ms, max {times[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
