"""Validator throughput against a bare sqlglot.parse_one, and false positives on real analyst SQL.

Run: .venv/bin/python benchmarks/safety_validator.py [--rounds 5]

Prints validations per second over the Spider dev gold set and the ratio to a bare
``sqlglot.parse_one`` of the same texts in the same run (each text parsed, then validated, back to
back; median ratio over N rounds), for two validators: without a schema (the rules alone), and
with resolution (each question's Spider schema, every reference resolved to a real column;
target 2.5x). It says whether the compiled ``sqlglotc`` build is in use. Then the false-positive
rate on Spider dev, spiderman (MySQL quoting) and text2sql-data: without a schema with
``SELECT *`` refused, and with the Spider schemas (default policy: stars expanded, references
resolved).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlglot  # noqa: E402

from safety import SafetyPolicy, SqlValidator  # noqa: E402
from safety.rules import RULES, check_shapes  # noqa: E402

CORPORA = ROOT / ".." / "shared" / "corpora"
TEXT2SQL = ("academic", "advising", "atis", "geography", "imdb", "restaurants", "scholar", "yelp")
# Refusals that are the documented policy, not false positives: SELECT * (when it cannot be
# expanded) and a LIMIT that is not a number (text2sql-data's template variable ``limit0``).
POLICY_CODES = frozenset({"select_star", "limit_not_literal"})


def spider_gold() -> list[str]:
    lines = (CORPORA / "spider_dev" / "dev_gold.sql").read_text().splitlines()
    return [line.split("\t")[0] for line in lines if line.strip()]


def spider_schemas() -> dict[str, dict[str, list[str]]]:
    schemas: dict[str, dict[str, list[str]]] = {}
    for db in json.loads((CORPORA / "spider_dev" / "tables.json").read_text()):
        tables: dict[str, list[str]] = {t: [] for t in db["table_names_original"]}
        for table_index, column in db["column_names_original"]:
            if table_index >= 0:
                tables[db["table_names_original"][table_index]].append(column)
        schemas[db["db_id"]] = tables
    return schemas


def corpus() -> list[tuple[str, str, str, str | None]]:
    """(source, dialect, sql, spider db_id or None)."""
    items: list[tuple[str, str, str, str | None]] = []
    for entry in json.loads((CORPORA / "spider_dev" / "dev.json").read_text()):
        items.append(("spider_dev", "sqlite", entry["query"], entry["db_id"]))
    with (CORPORA / "spider_dev_databases" / "test_queries.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            items.append(("spiderman", "mysql", row["sql"], row["database"]))
    for name in TEXT2SQL:
        for entry in json.loads((CORPORA / "text2sql_data" / f"{name}.json").read_text()):
            items.extend((f"text2sql/{name}", "mysql", sql, None) for sql in entry["sql"])
    return items


def throughput(
    items: list[tuple[str, str]], rounds: int, resolve: bool, rules: tuple | None = None
) -> tuple[float, float, float, float]:
    """Parse and validate each text back to back, so machine load hits both sides alike.

    Returns (validations/s, parses/s, median over rounds of validate time / parse time, and the
    per-query median: each statement's own ratio, its best round over its best round, then the
    median over statements).
    """
    schemas = spider_schemas()
    policy = SafetyPolicy(require_resolution=resolve)
    validators = {
        db: SqlValidator(
            "sqlite", policy, schema=schemas[db] if resolve else None, rules=rules or RULES
        )
        for db in {db for db, _ in items}
    }
    for db, text in items:  # warm-up: catalogs and dialect caches are built once per validator
        validators[db].validate(text)
    clock = time.perf_counter
    parse_times, validate_times = [], []
    best_parse = [float("inf")] * len(items)
    best_validate = [float("inf")] * len(items)
    for _ in range(rounds):
        parse_total = validate_total = 0.0
        for i, (db, text) in enumerate(items):
            start = clock()
            sqlglot.parse_one(text, read="sqlite")
            middle = clock()
            validators[db].validate(text)
            end = clock()
            parse_total += middle - start
            validate_total += end - middle
            best_parse[i] = min(best_parse[i], middle - start)
            best_validate[i] = min(best_validate[i], end - middle)
        parse_times.append(parse_total)
        validate_times.append(validate_total)
    ratios = sorted(v / p for v, p in zip(validate_times, parse_times, strict=False))
    per_query = sorted(v / p for v, p in zip(best_validate, best_parse, strict=True))
    return (
        len(items) / min(validate_times),
        len(items) / min(parse_times),
        ratios[len(ratios) // 2],
        per_query[len(per_query) // 2],
    )


def false_positives(items, mode: str) -> tuple[Counter, Counter, Counter]:
    """mode "reject": no schema, SELECT * refused; "resolve": the default policy, and where a
    Spider schema is known, every reference resolved against it (text2sql-data has none)."""
    schemas = spider_schemas()
    validators: dict[tuple[str, str | None], SqlValidator] = {}
    totals, wrong, policy = Counter(), Counter(), Counter()
    for source, dialect, sql, db_id in items:
        schema = schemas.get(db_id) if mode == "resolve" and db_id else None
        key = (dialect, db_id if schema else None)
        if key not in validators:
            validators[key] = SqlValidator(
                dialect,
                SafetyPolicy(star="reject")
                if mode == "reject"
                else SafetyPolicy(require_resolution=schema is not None),
                schema=schema,
            )
        result = validators[key].validate(sql)
        totals[source] += 1
        if result.ok:
            continue
        if result.refusal.code in POLICY_CODES:
            policy[(source, result.refusal.code)] += 1
        else:
            wrong[(source, result.refusal.code)] += 1
    return totals, wrong, policy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--compare-walk",
        action="store_true",
        help="also time resolution without the fail-closed walk (check_shapes), interleaved",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    if not CORPORA.is_dir():
        sys.exit(f"corpora not found at {CORPORA}")
    spider = [(db, sql) for source, _, sql, db in corpus() if source == "spider_dev" and db]
    compiled = sqlglot.parser.__file__.endswith(".so")
    print(
        f"Spider dev gold: {len(spider)} statements, {args.rounds} rounds, parse and validate "
        f"interleaved; sqlglot {sqlglot.__version__}{' compiled (sqlglotc)' if compiled else ' pure Python'}"
    )
    for label, resolve in (("rules only, no schema", False), ("with resolution", True)):
        per_second, parse_per_second, ratio, per_query = throughput(spider, args.rounds, resolve)
        print(f"  {label}:")
        print(f"    bare sqlglot.parse_one : {parse_per_second:8.0f} statements/s (best round)")
        print(f"    SqlValidator           : {per_second:8.0f} validations/s (best round)")
        print(f"    ratio validate/parse_one time: {ratio:.2f}x (median of rounds; target 2.5x)")
        print(f"    per-query median ratio       : {per_query:.2f}x (target 2.5x)")
    if args.compare_walk:
        without = tuple(rule for rule in RULES if rule is not check_shapes)
        print("  the fail-closed walk's cost (with resolution, per-query median ratio):")
        for label, rules in (("without", without), ("with", RULES)) * 2:
            print(f"    {label:7s} check_shapes: {throughput(spider, 3, True, rules)[3]:.2f}x")
    items = corpus()
    for star in ("reject", "resolve"):
        totals, wrong, policy = false_positives(items, star)
        n = sum(totals.values())
        print(
            f"\nFalse positives, {star}: {sum(wrong.values())} of {n} ({sum(wrong.values()) / n:.4%})"
        )
        for source in sorted(totals):
            fp = sum(v for (s, _), v in wrong.items() if s == source)
            pol = sum(v for (s, _), v in policy.items() if s == source)
            print(
                f"  {source:22s} {totals[source]:5d} statements  false positives {fp:3d}  policy refusals {pol:3d}"
            )
        for (source, code), count in sorted(wrong.items()):
            print(f"    false positive: {source} {code} x{count}")
        for (source, code), count in sorted(policy.items()):
            print(f"    policy: {source} {code} x{count}")


if __name__ == "__main__":
    main()
