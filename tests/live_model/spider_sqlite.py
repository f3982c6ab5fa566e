"""A Spider dev database as a SQLite file: its MySQL DDL read by sqlglot, its CSV rows loaded."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import sqlglot

from tests.conftest import ROOT

SPIDER_DATABASES = ROOT.parent / "shared" / "corpora" / "spider_dev_databases" / "databases"
SPIDER_DEV = ROOT.parent / "shared" / "corpora" / "spider_dev" / "dev.json"


def spider_root() -> Path | None:
    """Where the Spider dev databases are (../shared/corpora beside the repository), or None."""
    return SPIDER_DATABASES if SPIDER_DATABASES.is_dir() else None


def build_sqlite(root: Path, name: str, target: Path) -> Path:
    """``root/name/schema.sql`` (MySQL) and ``root/name/data/*.csv`` -> the SQLite file ``target``."""
    folder = root / name
    ddl = (folder / "schema.sql").read_text(encoding="utf-8")
    with sqlite3.connect(target) as conn:
        for statement in sqlglot.parse(ddl, read="mysql"):
            if statement is None:
                continue
            for table in statement.find_all(sqlglot.exp.Table):
                table.set("db", None)  # `concert_singer`.`singer` -> singer
            conn.execute(statement.sql(dialect="sqlite"))
        for data in sorted((folder / "data").glob("*.csv")):
            with data.open(newline="", encoding="utf-8") as handle:
                rows = list(csv.reader(handle))
            if not rows:
                continue
            header, body = rows[0], rows[1:]
            marks = ", ".join("?" for _ in header)
            columns = ", ".join(f'"{c}"' for c in header)
            conn.executemany(f'INSERT INTO "{data.stem}" ({columns}) VALUES ({marks})', body)
    return target
