"""Real SQL nobody on this project wrote (../shared/corpora): loaders for the corpus tests.

Not a test module. Everything skips with a reason when the corpora folder is absent.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from functools import cache
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

CORPORA = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpora"
TEXT2SQL = ("academic", "advising", "atis", "geography", "imdb", "restaurants", "scholar", "yelp")


def require(*parts: str) -> Path:
    path = CORPORA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"corpus {path} is absent (see ../shared/corpora/README.md)")
    return path


@cache
def spider_dev() -> list[dict]:
    return json.loads(require("spider_dev", "dev.json").read_text())


@cache
def spiderman_queries() -> list[dict]:
    with require("spider_dev_databases", "test_queries.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


@cache
def text2sql() -> list[tuple[str, str]]:
    """(dataset, sql) for every human-written query of text2sql-data."""
    out = []
    for name in TEXT2SQL:
        for entry in json.loads(require("text2sql_data", f"{name}.json").read_text()):
            out.extend((name, sql) for sql in entry["sql"])
    return out


@cache
def spider_schemas() -> dict[str, dict[str, list[str]]]:
    schemas: dict[str, dict[str, list[str]]] = {}
    for db in json.loads(require("spider_dev", "tables.json").read_text()):
        tables: dict[str, list[str]] = {t: [] for t in db["table_names_original"]}
        for table_index, column in db["column_names_original"]:
            if table_index >= 0:
                tables[db["table_names_original"][table_index]].append(column)
        schemas[db["db_id"]] = tables
    return schemas


def load_spider_sqlite(db_id: str, target: Path) -> Path | None:
    """Build ``target`` from the MySQL DDL and CSV data of one Spider database (None if absent)."""
    folder = CORPORA / "spider_dev_databases" / "databases" / db_id
    if not (folder / "schema.sql").exists():
        return None
    conn = sqlite3.connect(target)
    for statement in sqlglot.parse((folder / "schema.sql").read_text(), read="mysql"):
        if not isinstance(statement, exp.Create):
            continue
        table = statement.find(exp.Table).name
        columns = [
            f'"{c.name}" {c.args["kind"].sql("sqlite") if c.args.get("kind") else ""}'
            for c in statement.find_all(exp.ColumnDef)
        ]
        conn.execute(f'CREATE TABLE "{table}" ({", ".join(columns)})')
        data = folder / "data" / f"{table}.csv"
        if data.exists():
            with data.open(newline="", encoding="utf-8", errors="replace") as handle:
                rows = list(csv.reader(handle))
            if len(rows) > 1:
                marks = ", ".join("?" for _ in rows[0])
                conn.executemany(
                    f'INSERT INTO "{table}" VALUES ({marks})',
                    [
                        [None if v == "" else v for v in r]
                        for r in rows[1:]
                        if len(r) == len(rows[0])
                    ],
                )
    conn.commit()
    conn.close()
    return target


def _spider_tables(db_id: str) -> list[tuple[str, list[tuple[str, str]], list[list[str | None]]]]:
    """(table, [(column, kind)], rows) of one Spider database; kind is 'int', 'real' or 'text'."""
    folder = CORPORA / "spider_dev_databases" / "databases" / db_id
    if not (folder / "schema.sql").exists():
        return []
    out = []
    for statement in sqlglot.parse((folder / "schema.sql").read_text(), read="mysql"):
        if not isinstance(statement, exp.Create):
            continue
        table = statement.find(exp.Table).name
        columns = []
        for c in statement.find_all(exp.ColumnDef):
            kind = c.args.get("kind")
            if kind is not None and kind.is_type(*exp.DataType.INTEGER_TYPES):
                columns.append((c.name, "int"))
            elif kind is not None and kind.is_type(*exp.DataType.REAL_TYPES):
                columns.append((c.name, "real"))
            else:
                columns.append((c.name, "text"))
        rows: list[list[str | None]] = []
        data = folder / "data" / f"{table}.csv"
        if data.exists():
            with data.open(newline="", encoding="utf-8", errors="replace") as handle:
                found = list(csv.reader(handle))
            rows = [
                [None if v == "" else v for v in r] for r in found[1:] if len(r) == len(columns)
            ]
        out.append((table, columns, rows))
    return out


def load_spider_postgres(conn, db_id: str, schema: str) -> bool:
    """Create ``schema`` holding one Spider database (lower-case, unquoted names); False if absent."""
    tables = _spider_tables(db_id)
    if not tables:
        return False
    types = {"int": "BIGINT", "real": "DOUBLE PRECISION", "text": "TEXT"}
    cursor = conn.cursor()
    cursor.execute(f"CREATE SCHEMA {schema}")
    for table, columns, rows in tables:
        for attempt in ("typed", "text"):
            defs = ", ".join(
                f"{c.lower()} {types[k] if attempt == 'typed' else 'TEXT'}" for c, k in columns
            )
            cursor.execute(f"SAVEPOINT load_{attempt}")
            try:
                cursor.execute(f"CREATE TABLE {schema}.{table.lower()} ({defs})")
                with cursor.copy(f"COPY {schema}.{table.lower()} FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                cursor.execute(f"RELEASE SAVEPOINT load_{attempt}")
                break
            except Exception:  # a value that does not fit the declared type: keep it as text
                cursor.execute(f"ROLLBACK TO SAVEPOINT load_{attempt}")
    return True
