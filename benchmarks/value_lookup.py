"""Value-only questions about values in columns too large to index: found at ask time?

Run: nice -n 10 python benchmarks/value_lookup.py [--tables 200] [--wide 20] [--rows 5000]
         [--questions 300] [--budget 0.25]
     nice -n 10 python benchmarks/value_lookup.py --real [--questions 300] [--budget 0.25] [--seed 7]

A generated SQLite database of ``--tables`` tables (the value index's usual label columns of 8 and
80 values, a number and a date), ``--wide`` of which also hold a column of ``--rows`` distinct
people's names (more than the index keeps, so only the ask-time search can find them). Each
question names one stored person and nothing else ("Tell me everything about Roni Kessler."):
it reports how often the catalogue shows the table holding that person, and how long
``build_catalogue`` took (search included).

``--real`` uses real data instead: the 20 Spider dev databases' CSV files
(``../shared/corpora/spider_dev_databases``) and text2sql-data's GeoQuery and Restaurants SQLite
files, loaded into one SQLite database (every table prefixed with its database's name; 4,079
cities, 20,662 tennis players' names, restaurant names and streets are more values than the
index keeps per column). It asks ``--questions`` questions about a stored text value and
nothing else, half from columns with more distinct values than the index keeps (searched at ask
time), half from the others (indexed), each value drawn from a column drawn at random, and
counts a question found when a table holding the value (in any text column) is shown.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
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


CORPORA = ROOT / ".." / "shared" / "corpora"
SPIDER_DATA = CORPORA / "spider_dev_databases" / "databases"
SQLITE_FILES = {
    "geo": CORPORA / "text2sql_data" / "geography-db.added-in-2020.sqlite",
    "restaurants": CORPORA / "text2sql_data" / "restaurants-db.added-in-2020.sqlite",
}


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_real(path: Path) -> None:
    """The real corpora's data in one SQLite file, every table named ``<database>_<table>``."""
    conn = sqlite3.connect(path)
    for folder in sorted(SPIDER_DATA.glob("*/data")):
        database = folder.parent.name
        for source in sorted(folder.glob("*.csv")):
            with source.open(newline="", encoding="utf-8", errors="replace") as handle:
                rows = list(csv.reader(handle))
            if len(rows) < 2:
                continue
            header = [re.sub(r"\W+", "_", h.strip()).strip("_") or f"c{i}" for i, h in
                      enumerate(rows[0])]  # fmt: skip
            data = [r[: len(header)] + [""] * (len(header) - len(r)) for r in rows[1:]]
            types = [
                "REAL" if all(_number(r[i]) for r in data if r[i] not in ("", "NULL")) else "TEXT"
                for i in range(len(header))
            ]
            columns = ", ".join(f'"{h}" {t}' for h, t in zip(header, types, strict=True))
            name = f"{database}_{source.stem}"
            conn.execute(f'CREATE TABLE "{name}" ({columns})')
            marks = ", ".join("?" * len(header))
            conn.executemany(
                f'INSERT INTO "{name}" VALUES ({marks})',
                [[None if v in ("", "NULL") else v for v in r] for r in data],
            )
    for database, source in SQLITE_FILES.items():
        conn.execute("ATTACH DATABASE ? AS src", (f"file:{source}?mode=ro",))
        for (table,) in conn.execute("SELECT name FROM src.sqlite_master WHERE type = 'table'"):
            conn.execute(f'CREATE TABLE "{database}_{table}" AS SELECT * FROM src."{table}"')
        conn.commit()
        conn.execute("DETACH DATABASE src")
    conn.commit()
    conn.close()


def real(questions: int, budget: float, seed: int) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "real.sqlite"
        build_real(path)
        conn = sqlite3.connect(path)
        holders: dict[str, set[str]] = {}  # lower-cased value -> tables holding it
        by_column: dict[tuple[str, str], list[str]] = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for _, column, type_, *_ in conn.execute(f'PRAGMA table_info("{table}")'):
                if "REAL" in (type_ or "").upper() or "INT" in (type_ or "").upper():
                    continue
                found = {
                    str(v)
                    for (v,) in conn.execute(f'SELECT DISTINCT "{column}" FROM "{table}"')
                    if v is not None
                }
                for value in found:
                    holders.setdefault(value.lower(), set()).add(table)
                by_column[(table, column)] = sorted(
                    v for v in found if len(v) >= 3 and re.search("[A-Za-z]{3}", v)
                    and not _number(v) and len(v) <= 60 and not re.search(r"\d{4}-\d\d", v)
                )  # fmt: skip
        conn.close()
        engine = sa.create_engine(f"sqlite:///{path}")
        try:
            tables = SchemaExplorer(engine, cache_key="bench-value-lookup-real").tables()
            started = time.perf_counter()
            values = ValueIndex.build(engine, tables, limits=ValueLimits(search_s=budget))
            built = time.perf_counter() - started
            index = SchemaIndex(tables)
            limit = ValueLimits().per_column
            wide = sorted(k for k, v in by_column.items() if v and len(v) > limit)
            narrow = sorted(k for k, v in by_column.items() if v and len(v) <= limit)
            results: dict[str, list[bool]] = {"wide": [], "narrow": []}
            times: list[float] = []
            misses: list[str] = []
            for kind, pool in (("wide", wide), ("narrow", narrow)):
                for _ in range(questions // 2):
                    table, column = rng.choice(pool)
                    value = rng.choice(by_column[(table, column)])
                    question = f"Tell me everything about {value}."
                    started = time.perf_counter()
                    cat = build_catalogue([question], tables, index=index, values=values)
                    times.append((time.perf_counter() - started) * 1000)
                    hit = bool(holders[value.lower()] & set(cat.shown))
                    results[kind].append(hit)
                    if not hit and len(misses) < 10:
                        misses.append(f"{question!r} held by {sorted(holders[value.lower()])}")
        finally:
            engine.dispose()
    times.sort()
    print(
        f"real data: {len(tables)} tables; value index {len(values):,} values in "
        f"{values.columns} columns, {len(values.wide)} columns left to the ask-time search "
        f"({len(wide)} of them with values to ask about), built in {built:.1f} s; budget "
        f"{budget:.2f} s"
    )
    every = results["wide"] + results["narrow"]
    for label, got in (
        ("more values than the index keeps (searched at ask time)", results["wide"]),
        ("indexed columns", results["narrow"]),
        ("all", every),
    ):
        print(f"  {label}: table shown {sum(got)}/{len(got)} = {sum(got) / max(len(got), 1):.1%}")
    print(
        f"  build_catalogue p50 {statistics.median(times):.1f} ms, "
        f"p90 {times[int(0.9 * len(times))]:.1f} ms, max {times[-1]:.1f} ms"
    )
    for miss in misses:
        print(f"    miss: {miss}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--wide", type=int, default=20)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--budget", type=float, default=ValueLimits().search_s)
    parser.add_argument("--real", action="store_true", help="the corpora's real data instead")
    parser.add_argument("--seed", type=int, default=7, help="with --real: which draw of values")
    args = parser.parse_args()
    if args.real:
        real(args.questions, args.budget, args.seed)
        return
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
