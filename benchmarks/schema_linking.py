"""Schema linking on a schema nobody tuned for: every public Spider schema merged into one.

Run: .venv/bin/python benchmarks/schema_linking.py [--max-tables N] [--comments] [--misses N]

The 166 schemas of ``../shared/corpora/spider_dev/tables.json`` become one catalogue of about
875 tables (a table name is prefixed with its database's only where two databases share it);
the 1,034 Spider dev questions are asked against it, each needing the tables its gold SQL reads
(found with sqlglot). For each question it reports whether every needed table was shown with its
columns, the per-table recall, the catalogue's and the whole Batch-1 request's size as a share of
the same with the whole schema, and the ranking time; against a plain BM25 ranker (identifier
words, no stemming) showing the same number of tables, in the same run. Then the same for
catalogues of 10 consecutive questions, as ``sqlgate batch`` builds them, and the 300-table
ERP fixture before (the ranker in git ``HEAD``, or ``--before REV``) and after.

``--comments`` gives each table and column Spider's own natural-language name as a comment
(``country code`` for ``CountryCode``): the figures then show what comments add. ``--values N``
samples N values per text column from ``../shared/corpora/spider_dev_databases`` (data exists
only for the 20 databases the dev questions ask about, which favours them: read that run as an
upper bound of what values add). Sizes are characters.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import itertools
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
import sqlglot  # noqa: E402
from sqlglot import exp  # noqa: E402

from agents.catalogue import (  # noqa: E402
    DEFAULT_MAX_NAMED,
    DEFAULT_MAX_TABLES,
    build_catalogue,
    index_for,
)
from agents.linking import SchemaIndex, words  # noqa: E402
from agents.llm_batch import QuestionInput  # noqa: E402
from agents.reasoning import ReasoningAgent  # noqa: E402
from agents.schema_explorer import (  # noqa: E402
    SAMPLE_ROWS,
    SHORT_TEXT_CHARS,
    ColumnInfo,
    ForeignKeyInfo,
    SchemaExplorer,
    TableInfo,
)

CORPORA = ROOT / ".." / "shared" / "corpora" / "spider_dev"
DATABASES = ROOT / ".." / "shared" / "corpora" / "spider_dev_databases" / "databases"
BATCH = 10
REPEATS = 3
T = TypeVar("T")


def merged_spider(
    comments: bool, values: int = 0
) -> tuple[dict[str, TableInfo], dict[str, dict[str, str]]]:
    """All Spider schemas as one: tables, and per database its lower-case names -> merged names.

    With ``values`` > 0, text columns of the databases that have data here get up to that many
    sampled values, read the way ``SchemaExplorer(sample_values=...)`` reads them.
    """
    dbs = json.loads((CORPORA / "tables.json").read_text())
    owners: dict[str, set[str]] = {}
    for db in dbs:
        for name in db["table_names_original"]:
            owners.setdefault(name.lower(), set()).add(db["db_id"])
    merged: dict[str, TableInfo] = {}
    names_of: dict[str, dict[str, str]] = {}
    for db in dbs:
        originals = db["table_names_original"]
        rename = {
            name: (f"{db['db_id']}_{name}" if len(owners[name.lower()]) > 1 else name)
            for name in originals
        }
        names_of[db["db_id"]] = {name.lower(): rename[name] for name in originals}
        infos = [
            TableInfo(name=rename[name], comment=db["table_names"][i] if comments else None)
            for i, name in enumerate(originals)
        ]
        columns = db["column_names_original"]
        for position, (table_index, column) in enumerate(columns):
            if table_index >= 0:
                infos[table_index].columns.append(
                    ColumnInfo(
                        name=column,
                        type=db["column_types"][position].upper(),
                        primary_key=position in db["primary_keys"],
                        comment=db["column_names"][position][1] if comments else None,
                    )
                )
        for source, target in db["foreign_keys"]:
            (src_table, src_col), (dst_table, dst_col) = columns[source], columns[target]
            infos[src_table].foreign_keys.append(
                ForeignKeyInfo(
                    columns=[src_col],
                    referred_table=rename[originals[dst_table]],
                    referred_columns=[dst_col],
                )
            )
        if values:
            _sample_csv_values(db["db_id"], infos, values)
        merged.update((info.name, info) for info in infos)
    return merged, names_of


def _sample_csv_values(db_id: str, infos: list[TableInfo], limit: int) -> None:
    folder = DATABASES / db_id / "data"
    if not folder.is_dir():
        return
    files = {path.stem.lower(): path for path in folder.glob("*.csv")}
    for info in infos:
        original = info.name[len(db_id) + 1 :] if info.name.startswith(f"{db_id}_") else info.name
        path = files.get(original.lower())
        if path is None:
            continue
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            rows = list(itertools.islice(csv.DictReader(handle), SAMPLE_ROWS))
        for column in info.columns:
            if column.type != "TEXT":
                continue
            seen: dict[str, None] = {}
            for row in rows:
                value = next(
                    (v for k, v in row.items() if k and k.lower() == column.name.lower()), None
                )
                if value and len(value) <= SHORT_TEXT_CHARS:
                    seen[value] = None
            column.values = list(seen)[:limit]


def gold_tables(sql: str, names: dict[str, str]) -> set[str]:
    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found = {t.name.lower() for t in tree.find_all(exp.Table)} - ctes
    return {names[n] for n in found if n in names}


class BM25:
    """Okapi BM25 over each table's identifier words (name and columns), no stemming."""

    def __init__(self, tables: dict[str, TableInfo], k1: float = 1.2, b: float = 0.75) -> None:
        self.names = list(tables)
        self.docs = [
            words(t.name) + [w for c in t.columns for w in words(c.name)] for t in tables.values()
        ]
        self.k1, self.b = k1, b
        self.avg = statistics.mean(len(d) for d in self.docs)
        df: dict[str, int] = {}
        for doc in self.docs:
            for w in set(doc):
                df[w] = df.get(w, 0) + 1
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.tf = [{w: doc.count(w) for w in set(doc)} for doc in self.docs]

    def rank(self, question: str, limit: int) -> list[str]:
        terms = set(words(question))
        scores = []
        for i, tf in enumerate(self.tf):
            s = 0.0
            for w in terms:
                f = tf.get(w)
                if f:
                    norm = self.k1 * (1 - self.b + self.b * len(self.docs[i]) / self.avg)
                    s += self.idf[w] * f * (self.k1 + 1) / (f + norm)
            scores.append(s)
        order = sorted(range(len(self.names)), key=lambda i: -scores[i])
        return [self.names[i] for i in order[:limit]]


def request_chars(questions: Sequence[str], catalogue: str) -> int:
    items = [QuestionInput(f"q{i + 1}", q) for i, q in enumerate(questions)]
    return sum(
        len(m["content"]) for m in ReasoningAgent().build_messages(items, catalogue, "sqlite")
    )


def rendered(tables: dict[str, TableInfo], shown: list[str]) -> str:
    """A catalogue of exactly ``shown`` written the way ``build_catalogue`` writes its own."""
    index = index_for(tables)
    named = _neighbours(index, shown)
    text = "\n".join(tables[n].catalogue_line() for n in shown)
    if named:
        text += f"\n-- {len(named)} more tables, columns not shown: " + ", ".join(named)
    rest = len(tables) - len(shown) - len(named)
    return text + f"\n-- {rest} other tables are not listed" if rest else text


def _neighbours(index: SchemaIndex, shown: list[str]) -> list[str]:
    seen = set(shown)
    out: list[str] = []
    for name in shown:
        for other in index.neighbours(name):
            if other not in seen:
                seen.add(other)
                out.append(other)
    return out[:DEFAULT_MAX_NAMED]


def timed(run: Callable[[T], object], inputs: Sequence[T]) -> list[float]:
    """Milliseconds per input, the best of ``REPEATS`` passes (other processes share the CPU)."""
    best = [math.inf] * len(inputs)
    for _ in range(REPEATS):
        for i, item in enumerate(inputs):
            started = time.perf_counter()
            run(item)
            best[i] = min(best[i], (time.perf_counter() - started) * 1000)
    return best


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(
    label: str,
    complete: list[bool],
    found: int,
    needed: int,
    shares: list[float],
    requests: list[float],
) -> None:
    print(
        f"  {label}\n    every needed table shown {sum(complete)}/{len(complete)} = "
        f"{sum(complete) / len(complete):.1%}; per-table recall {found}/{needed} = "
        f"{found / needed:.1%}; catalogue share mean {statistics.mean(shares):.1%} "
        f"max {max(shares):.1%}; request share mean {statistics.mean(requests):.1%} "
        f"max {max(requests):.1%}"
    )


def spider(max_tables: int, comments: bool, values: int, misses: int, before: str | None) -> None:
    tables, names_of = merged_spider(comments, values)
    dev = json.loads((CORPORA / "dev.json").read_text())
    started = time.perf_counter()
    index = SchemaIndex(tables)
    index_ms = (time.perf_counter() - started) * 1000
    bm25 = BM25(tables)
    whole = "\n".join(t.catalogue_line() for t in tables.values())
    cases = []
    for entry in dev:
        gold = gold_tables(entry["query"], names_of[entry["db_id"]])
        if gold:
            cases.append((entry["question"], gold))
    print(
        f"Merged Spider schema: {len(tables)} tables, "
        f"{sum(len(t.columns) for t in tables.values())} columns, "
        f"{sum(len(t.foreign_keys) for t in tables.values())} foreign keys; whole catalogue "
        f"{len(whole):,} characters; {len(cases)} of {len(dev)} dev questions read a table; "
        f"comments {'on (Spider natural-language names)' if comments else 'off'}; "
        f"sampled values {f'up to {values} per text column' if values else 'off'}; "
        f"index built in {index_ms:.0f} ms"
    )
    build_catalogue([cases[0][0]], tables, index=index)  # warm the stemmer's and splitter's caches
    ours: dict[str, list] = {"complete": [], "share": [], "request": [], "ms": []}
    base: dict[str, list] = {"complete": [], "share": [], "request": []}
    found = base_found = needed = listed = 0
    missed = []
    ours["ms"] = timed(
        lambda q: build_catalogue([q], tables, max_tables=max_tables, index=index),
        [q for q, _ in cases],
    )
    for question, gold in cases:
        cat = build_catalogue([question], tables, max_tables=max_tables, index=index)
        shown = set(cat.shown)
        whole_request = request_chars([question], whole)
        ours["complete"].append(gold <= shown)
        ours["share"].append(len(cat.text) / len(whole))
        ours["request"].append(request_chars([question], cat.text) / whole_request)
        found += len(gold & shown)
        needed += len(gold)
        listed += gold <= shown | set(cat.named)
        if not gold <= shown:
            missed.append((question, sorted(gold - shown), cat.shown[:5]))
        b_shown = bm25.rank(question, len(cat.shown))
        b_text = rendered(tables, b_shown)
        base["complete"].append(gold <= set(b_shown))
        base["share"].append(len(b_text) / len(whole))
        base["request"].append(request_chars([question], b_text) / whole_request)
        base_found += len(gold & set(b_shown))
    print(f"one question per catalogue, top {max_tables} shown (BM25 shows as many tables):")
    report("ranker", ours["complete"], found, needed, ours["share"], ours["request"])
    print(
        f"    every needed table shown or named (names line) {listed}/{len(cases)} = "
        f"{listed / len(cases):.1%}"
    )
    report("BM25", base["complete"], base_found, needed, base["share"], base["request"])
    rev = before or last_lexical_ranker()
    old = old_catalogue_module(rev) if rev else None
    if old is not None:
        old_index = old.CatalogueIndex(tables)
        complete, shares, requests = [], [], []
        old_found = 0
        for question, gold in cases:
            text = old.compact_catalogue(question, tables, index=old_index)
            shown = set(old_index.rank(question, old.DEFAULT_MAX_TABLES))
            complete.append(gold <= shown)
            old_found += len(gold & shown)
            shares.append(len(text) / len(whole))
            requests.append(request_chars([question], text) / request_chars([question], whole))
        report(
            f"before ({rev}, top {old.DEFAULT_MAX_TABLES})",
            complete,
            old_found,
            needed,
            shares,
            requests,
        )
    print(
        f"  ranking time per question (build_catalogue, best of {REPEATS} runs) "
        f"p50 {pct(ours['ms'], 0.5):.2f} ms, p90 {pct(ours['ms'], 0.9):.2f} ms, "
        f"max {max(ours['ms']):.2f} ms (index built once)"
    )
    for question, lost, top in missed[:misses]:
        print(f"    miss: {question!r} needs {lost}; top {top}")

    complete, shares, requests = [], [], []
    b_complete, b_shares, b_requests = [], [], []
    found = base_found = 0
    chunks = [cases[start : start + BATCH] for start in range(0, len(cases), BATCH)]
    ms = timed(
        lambda qs: build_catalogue(qs, tables, max_tables=max_tables, index=index),
        [[q for q, _ in chunk] for chunk in chunks],
    )
    for chunk in chunks:
        questions = [q for q, _ in chunk]
        cat = build_catalogue(questions, tables, max_tables=max_tables, index=index)
        whole_request = request_chars(questions, whole)
        shares.append(len(cat.text) / len(whole))
        requests.append(request_chars(questions, cat.text) / whole_request)
        b_union: list[str] = []
        per = max(1, math.ceil(len(cat.shown) / len(chunk)))
        for q in questions:
            b_union += [n for n in bm25.rank(q, per) if n not in b_union]
        b_text = rendered(tables, b_union)
        b_shares.append(len(b_text) / len(whole))
        b_requests.append(request_chars(questions, b_text) / whole_request)
        for _, gold in chunk:
            complete.append(gold <= set(cat.shown))
            found += len(gold & set(cat.shown))
            b_complete.append(gold <= set(b_union))
            base_found += len(gold & set(b_union))
    print(f"{BATCH} consecutive questions per catalogue (as sqlgate batch builds it):")
    report("ranker", complete, found, needed, shares, requests)
    report("BM25", b_complete, base_found, needed, b_shares, b_requests)
    print(
        f"  ranking time per catalogue (best of {REPEATS} runs) p50 {pct(ms, 0.5):.1f} ms, "
        f"p90 {pct(ms, 0.9):.1f} ms"
    )


def old_catalogue_module(rev: str) -> ModuleType | None:
    """``agents/catalogue.py`` as it was at ``rev``, loaded under another name."""
    try:
        source = subprocess.run(
            ["git", "show", f"{rev}:agents/catalogue.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    if "class CatalogueIndex" not in source:
        return None
    spec = importlib.util.spec_from_loader("catalogue_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    exec(compile(source, f"{rev}:agents/catalogue.py", "exec"), module.__dict__)  # noqa: S102
    return module


def last_lexical_ranker() -> str | None:
    """The newest commit whose ``agents/catalogue.py`` still held the lexical ``CatalogueIndex``."""
    try:
        revs = subprocess.run(
            ["git", "log", "--format=%h", "--", "agents/catalogue.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    for rev in revs:
        shown = subprocess.run(
            ["git", "show", f"{rev}:agents/catalogue.py"], cwd=ROOT, capture_output=True, text=True
        )
        if "class CatalogueIndex" in shown.stdout:
            return rev
    return None


def erp(max_tables: int, before: str | None) -> None:
    from tests.fixtures.erp_db import ERP_QUESTIONS, build_erp_database

    with tempfile.TemporaryDirectory() as tmp:
        path = build_erp_database(Path(tmp) / "erp.sqlite")
        engine = sa.create_engine(f"sqlite:///{path}")
        try:
            tables = SchemaExplorer(engine, cache_key="benchmark-linking-erp").tables()
        finally:
            engine.dispose()
    whole = "\n".join(t.catalogue_line() for t in tables.values())
    print(
        f"ERP fixture: {len(tables)} tables, {len(ERP_QUESTIONS)} questions, whole catalogue "
        f"{len(whole):,} characters"
    )
    before = before or last_lexical_ranker()
    old = old_catalogue_module(before) if before else None
    runs: list[tuple[str, Callable[[str], tuple[str, set[str]]]]] = []
    if old is not None:
        old_index = old.CatalogueIndex(tables)

        def before_run(q: str) -> tuple[str, set[str]]:
            text = old.compact_catalogue(q, tables, index=old_index)
            return text, set(old_index.rank(q, old.DEFAULT_MAX_TABLES))

        runs.append((f"before ({before})", before_run))
    index = SchemaIndex(tables)

    def after_run(q: str) -> tuple[str, set[str]]:
        cat = build_catalogue([q], tables, max_tables=max_tables, index=index)
        return cat.text, set(cat.shown)

    runs.append(("after", after_run))
    for label, run in runs:
        complete, shares, requests = [], [], []
        found = needed = 0
        for question, gold in ERP_QUESTIONS:
            text, shown = run(question)
            complete.append(gold <= shown)
            found += len(gold & shown)
            needed += len(gold)
            shares.append(len(text) / len(whole))
            requests.append(request_chars([question], text) / request_chars([question], whole))
        report(label, complete, found, needed, shares, requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tables", type=int, default=DEFAULT_MAX_TABLES)
    parser.add_argument("--comments", action="store_true")
    parser.add_argument(
        "--values",
        type=int,
        default=0,
        help="sample this many values per text column (only the 20 dev databases have data)",
    )
    parser.add_argument("--misses", type=int, default=0, help="print this many missed questions")
    parser.add_argument(
        "--before",
        default=None,
        help="git revision of the ranker to compare (default: the last one with CatalogueIndex)",
    )
    parser.add_argument("--skip-erp", action="store_true")
    args = parser.parse_args()
    if not (CORPORA / "dev.json").is_file():
        print(f"Spider dev absent at {CORPORA}: nothing to measure")
    else:
        spider(args.max_tables, args.comments, args.values, args.misses, args.before)
    if not args.skip_erp:
        print()
        erp(args.max_tables, args.before)


if __name__ == "__main__":
    main()
