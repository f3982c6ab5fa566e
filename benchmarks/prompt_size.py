"""Batch-1 prompt size on the 300-table ERP schema, ranked and pruned against the whole schema.

Run: .venv/bin/python benchmarks/prompt_size.py [--max-tables N] [--per-question]

For every question of ``tests.fixtures.erp_db.ERP_QUESTIONS`` it prints the size of the reasoning
step's catalogue (``agents.catalogue.compact_catalogue``) and of the whole Batch-1 request (system
and user messages as ``ReasoningAgent`` builds them) as a share of the same with the whole schema
(``SchemaExplorer.catalogue()``); the recall of the gold tables (a table counts as included when it
is shown with its columns); and the ranking time. Then the same ranker over Spider dev
(../shared/corpora/spider_dev: gold tables read from the gold SQL with sqlglot), as recall at a
small cutoff, against the schema's own table order as a baseline.

Sizes are in characters. Token counts are not printed: tiktoken installs from PyPI but fetches its
encoding files over the network on first use, so it cannot count offline here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
import sqlglot  # noqa: E402
from sqlglot import exp  # noqa: E402

from agents.catalogue import (  # noqa: E402
    DEFAULT_MAX_TABLES,
    LARGE_SCHEMA_TABLES,
    SchemaIndex,
    build_catalogue,
    compact_catalogue,
    rank_tables,
)
from agents.llm_batch import QuestionInput  # noqa: E402
from agents.reasoning import ReasoningAgent  # noqa: E402
from agents.schema_explorer import ColumnInfo, ForeignKeyInfo, SchemaExplorer, TableInfo  # noqa: E402
from tests.fixtures.erp_db import ERP_QUESTIONS, build_erp_database  # noqa: E402

CORPORA = ROOT / ".." / "shared" / "corpora"
TARGET_SHARE = 0.15


def request_chars(question: str, catalogue: str) -> int:
    return sum(
        len(m["content"])
        for m in ReasoningAgent().build_messages(
            [QuestionInput("q1", question)], catalogue, "sqlite"
        )
    )


def erp(max_tables: int, per_question: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = build_erp_database(Path(tmp) / "erp.sqlite")
        engine = sa.create_engine(f"sqlite:///{path}")
        try:
            tables = SchemaExplorer(engine, cache_key="benchmark-erp").tables()
        finally:
            engine.dispose()
    whole = "\n".join(t.catalogue_line() for t in tables.values())
    started = time.perf_counter()
    index = SchemaIndex(tables)
    index_ms = (time.perf_counter() - started) * 1000

    shares, request_shares, ranks, rank_ms = [], [], [], []
    included = total_gold = complete = 0
    if per_question:
        print(f"{'chars':>6} {'share':>6} {'worst gold rank':>15}  question")
    for question, gold in ERP_QUESTIONS:
        started = time.perf_counter()
        text = compact_catalogue(question, tables, max_tables=max_tables, index=index)
        rank_ms.append((time.perf_counter() - started) * 1000)
        ranked = index.rank(question)
        order = {name: i + 1 for i, name in enumerate(ranked)}
        shown = set(build_catalogue([question], tables, max_tables=max_tables, index=index).shown)
        included += len(gold & shown)
        total_gold += len(gold)
        complete += gold <= shown
        ranks.append(max(order.get(g, len(tables)) for g in gold))  # unranked: last
        shares.append(len(text) / len(whole))
        request_shares.append(request_chars(question, text) / request_chars(question, whole))
        if per_question:
            print(f"{len(text):>6} {shares[-1]:>6.1%} {ranks[-1]:>15}  {question}")

    started = time.perf_counter()
    for question, _ in ERP_QUESTIONS:
        SchemaIndex(tables).rank(question, max_tables)
    cold_ms = (time.perf_counter() - started) * 1000 / len(ERP_QUESTIONS)
    rank_tables(ERP_QUESTIONS[0][0], tables)  # indexes the schema mapping once
    started = time.perf_counter()
    for question, _ in ERP_QUESTIONS:
        compact_catalogue(question, tables, max_tables=max_tables)
    warm_ms = (time.perf_counter() - started) * 1000 / len(ERP_QUESTIONS)

    print(
        f"ERP schema: {len(tables)} tables, {sum(len(t.columns) for t in tables.values())} columns, "
        f"{sum(len(t.foreign_keys) for t in tables.values())} foreign keys; {len(ERP_QUESTIONS)} questions"
    )
    print(f"whole-schema catalogue: {len(whole):,} characters")
    print(
        f"ranked catalogue, top {max_tables} in full (within the character budget) + the names of "
        "their foreign-key neighbours:"
    )
    print(
        f"  catalogue share of whole   mean {statistics.mean(shares):.1%}  max {max(shares):.1%}"
        f"  (target <= {TARGET_SHARE:.0%})"
    )
    print(
        f"  Batch-1 request share      mean {statistics.mean(request_shares):.1%}"
        f"  max {max(request_shares):.1%}  (system + user messages)"
    )
    print(
        f"  gold-table recall          {included}/{total_gold} = {included / total_gold:.1%};"
        f" questions with every gold table shown {complete}/{len(ERP_QUESTIONS)}"
    )
    print(
        f"  worst gold rank per question: median {statistics.median(ranks):g}, max {max(ranks)}"
        f"  (the smallest cutoff with full recall is {max(ranks)})"
    )
    print(
        f"  time: index {index_ms:.1f} ms once per schema; catalogue per question "
        f"{statistics.median(rank_ms):.2f} ms median with the index "
        f"({warm_ms:.2f} ms mean through the cached index), {cold_ms:.1f} ms re-indexing every time"
    )
    for k in (5, 10):
        chunks = [ERP_QUESTIONS[i : i + k] for i in range(0, len(ERP_QUESTIONS), k)]
        cats = [
            build_catalogue([q for q, _ in chunk], tables, max_tables=max_tables, index=index)
            for chunk in chunks
        ]
        batch_shares = [len(c.text) / len(whole) for c in cats]
        kept = sum(
            len(gold & set(c.shown))
            for chunk, c in zip(chunks, cats, strict=False)
            for _, gold in chunk
        )
        print(
            f"  {k} questions per Batch-1 call (build_catalogue): one catalogue per call, share of whole "
            f"mean {statistics.mean(batch_shares):.1%} max {max(batch_shares):.1%}, "
            f"gold recall {kept}/{total_gold}"
        )
    print(
        "  sizes in characters: tiktoken needs a network download of its encodings, so no token counts"
    )


def spider_schemas(dev_ids: set[str]) -> dict[str, dict[str, TableInfo]]:
    schemas: dict[str, dict[str, TableInfo]] = {}
    for db in json.loads((CORPORA / "spider_dev" / "tables.json").read_text()):
        if db["db_id"] not in dev_ids:
            continue
        names = db["table_names_original"]
        columns = db["column_names_original"]
        infos = [TableInfo(name=name) for name in names]
        for position, (table_index, column) in enumerate(columns):
            if table_index >= 0:
                infos[table_index].columns.append(
                    ColumnInfo(
                        name=column,
                        type=db["column_types"][position].upper(),
                        primary_key=position in db["primary_keys"],
                    )
                )
        for source, target in db["foreign_keys"]:
            (src_table, src_col), (dst_table, dst_col) = columns[source], columns[target]
            infos[src_table].foreign_keys.append(
                ForeignKeyInfo(
                    columns=[src_col], referred_table=names[dst_table], referred_columns=[dst_col]
                )
            )
        schemas[db["db_id"]] = {info.name: info for info in infos}
    return schemas


def gold_tables(sql: str, names: dict[str, str]) -> set[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found = {t.name.lower() for t in tree.find_all(exp.Table)} - ctes
    return {names[n] for n in found if n in names}


def spider(cutoffs: tuple[int, ...]) -> None:
    dev = json.loads((CORPORA / "spider_dev" / "dev.json").read_text())
    schemas = spider_schemas({entry["db_id"] for entry in dev})
    indexes = {db: SchemaIndex(tables) for db, tables in schemas.items()}
    hits = {
        k: [0, 0, 0] for k in cutoffs
    }  # gold tables included, questions complete, baseline complete
    hits_base = {k: 0 for k in cutoffs}
    gold_total = questions = 0
    for entry in dev:
        tables = schemas[entry["db_id"]]
        gold = gold_tables(entry["query"], {name.lower(): name for name in tables})
        if not gold:
            continue
        questions += 1
        gold_total += len(gold)
        ranked = indexes[entry["db_id"]].rank(entry["question"])
        for k in cutoffs:
            shown, baseline = set(ranked[:k]), set(list(tables)[:k])
            hits[k][0] += len(gold & shown)
            hits[k][1] += gold <= shown
            hits_base[k] += len(gold & baseline)
            hits[k][2] += gold <= baseline
    sizes = [len(t) for t in schemas.values()]
    print(
        f"Spider dev: {questions} questions over {len(schemas)} databases of {min(sizes)}-{max(sizes)} tables "
        f"(mean {statistics.mean(sizes):.1f}); compact_catalogue keeps them whole "
        f"(<= {LARGE_SCHEMA_TABLES} tables), so this is the ranker alone at a small cutoff"
    )
    for k in cutoffs:
        included, complete, base_complete = hits[k]
        print(
            f"  top-{k}: gold-table recall {included / gold_total:.1%}, every gold table {complete / questions:.1%}"
            f"  | schema order: {hits_base[k] / gold_total:.1%}, {base_complete / questions:.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tables", type=int, default=DEFAULT_MAX_TABLES)
    parser.add_argument("--per-question", action="store_true")
    args = parser.parse_args()
    erp(args.max_tables, args.per_question)
    print()
    if (CORPORA / "spider_dev" / "dev.json").is_file():
        spider((3, 5))
    else:
        print(f"Spider dev skipped: {CORPORA / 'spider_dev'} is absent")


if __name__ == "__main__":
    main()
