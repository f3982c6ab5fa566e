"""Schemas and questions for the schema-linking benchmark, from ../shared/corpora (not a benchmark).

Two merged schemas, each a catalogue of tables from many databases (a table name is prefixed with
its database's only where two databases share it, so generic names crowd one another):

- **Spider**: the 166 schemas of ``spider_dev/tables.json`` (about 875 tables). Questions from
  ``spider_train/train_spider.json`` (tuning) or ``spider_dev/dev.json`` (the report). Values
  exist only for the 20 dev databases (``spider_dev_databases``, CSV).
- **text2sql-data**: ATIS, Advising, GeoQuery, Restaurants, Scholar, Yelp, IMDB and Academic.
  GeoQuery and Restaurants come with SQLite databases (schema and values read from them); the
  others' schemas are rebuilt from their gold SQL (every table and qualified column it uses,
  and a foreign key for each join between two tables), and their values are the variables the
  questions were written with and the text literals their SQL compares columns with. Each
  question has its variables put back (``city_name0`` -> ``denver``), so many questions name a
  value and no table.

A question's gold tables are the tables its gold SQL reads (sqlglot). Its *value links* are the
(table, column, literal) of each comparison in the gold SQL between a column and a text literal
that the question itself contains; a question is *value-only* when one of its gold tables is
reached by a value link and by no word of the table's name or columns.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot
from sqlglot import exp

from agents.linking import identifier_terms, question_words
from agents.schema_explorer import ColumnInfo, ForeignKeyInfo, TableInfo

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT / ".." / "shared" / "corpora"
SPIDER_TABLES = CORPORA / "spider_dev" / "tables.json"
SPIDER_QUESTIONS = {
    "train": CORPORA / "spider_train" / "train_spider.json",
    "dev": CORPORA / "spider_dev" / "dev.json",
}
SPIDER_DATA = CORPORA / "spider_dev_databases" / "databases"
TEXT2SQL = CORPORA / "text2sql_data"
TEXT2SQL_SETS = (
    "atis",
    "advising",
    "geography",
    "restaurants",
    "scholar",
    "yelp",
    "imdb",
    "academic",
)
TEXT2SQL_DATABASES = {
    "geography": "geography-db.added-in-2020.sqlite",
    "restaurants": "restaurants-db.added-in-2020.sqlite",
}


@dataclass
class Case:
    """One question: its database, gold tables and value links."""

    question: str
    database: str
    gold: set[str]
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (table, column, literal)
    value_only: bool = False


@dataclass
class Corpus:
    """A merged schema, its questions, and the values of its text columns where known."""

    name: str
    tables: dict[str, TableInfo]
    cases: list[Case]
    values: dict[tuple[str, str], list[str]]
    note: str


#: Share of databases kept out of tuning, chosen by a seeded hash of the database's name.
HELD_OUT_SHARE = 0.2
HELD_OUT_SEED = "sqlgate-linking-held-out-1"


def held_out(database: str) -> bool:
    """True for the fixed ~20 % of databases (Spider train databases, text2sql-data sets) that
    tuning never looks at: the first 32 bits of sha256(seed:name) below 20 % of their range."""
    digest = hashlib.sha256(f"{HELD_OUT_SEED}:{database}".encode()).digest()
    return int.from_bytes(digest[:4], "big") < HELD_OUT_SHARE * 2**32


def part(corpus: Corpus, which: str) -> Corpus:
    """The corpus with only the questions of the tuning part, the held-out part, or all."""
    if which == "all":
        return corpus
    keep = [c for c in corpus.cases if held_out(c.database) == (which == "held-out")]
    return Corpus(f"{corpus.name} ({which})", corpus.tables, keep, corpus.values, corpus.note)


# -- Spider ------------------------------------------------------------------------------------


def spider(split: str) -> Corpus:
    dbs = json.loads(SPIDER_TABLES.read_text())
    owners: dict[str, set[str]] = {}
    for db in dbs:
        for name in db["table_names_original"]:
            owners.setdefault(name.lower(), set()).add(db["db_id"])
    tables: dict[str, TableInfo] = {}
    names_of: dict[str, dict[str, str]] = {}
    columns_of: dict[str, dict[str, list[str]]] = {}
    for db in dbs:
        originals = db["table_names_original"]
        rename = {n: (f"{db['db_id']}_{n}" if len(owners[n.lower()]) > 1 else n) for n in originals}
        names_of[db["db_id"]] = {n.lower(): rename[n] for n in originals}
        infos = [TableInfo(name=rename[n]) for n in originals]
        columns = db["column_names_original"]
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
                    columns=[src_col],
                    referred_table=rename[originals[dst_table]],
                    referred_columns=[dst_col],
                )
            )
        tables.update((info.name, info) for info in infos)
        columns_of[db["db_id"]] = {
            rename[n].lower(): [c.name.lower() for c in info.columns]
            for n, info in zip(originals, infos, strict=True)
        }
    values = _spider_values(dbs, names_of)
    cases = []
    for entry in json.loads(SPIDER_QUESTIONS[split].read_text()):
        names = names_of[entry["db_id"]]
        tree = _parse(entry["query"], "sqlite")
        if tree is None:
            continue
        gold = _gold(tree, names)
        if not gold:
            continue
        compared = _comparisons(tree, _aliases(tree))
        links = _links(tree, compared, names, columns_of[entry["db_id"]], entry["question"])
        cases.append(Case(entry["question"], entry["db_id"], gold, links))
    _mark_value_only(cases, tables)
    return Corpus(
        f"Spider {split}",
        tables,
        cases,
        values,
        "values of the 20 dev databases only (CSV); the train databases have no data here",
    )


def _spider_values(
    dbs: list[dict], names_of: dict[str, dict[str, str]]
) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for db in dbs:
        folder = SPIDER_DATA / db["db_id"] / "data"
        if not folder.is_dir():
            continue
        files = {path.stem.lower(): path for path in folder.glob("*.csv")}
        for original, merged in names_of[db["db_id"]].items():
            path = files.get(original)
            if path is None:
                continue
            with path.open(newline="", encoding="utf-8", errors="replace") as handle:
                reader = csv.reader(handle)
                header = next(reader, [])
                rows = list(itertools.islice(reader, 20_000))
            for i, column in enumerate(header):
                found = [row[i] for row in rows if i < len(row) and row[i] and row[i] != "NULL"]
                if found and not all(_number(v) for v in found):
                    out[(merged, column)] = found
    return out


# -- text2sql-data ----------------------------------------------------------------------------


def text2sql() -> Corpus:
    per_set: dict[str, dict[str, TableInfo]] = {}
    per_values: dict[str, dict[tuple[str, str], list[str]]] = {}
    entries: dict[str, list[dict]] = {}
    for name in TEXT2SQL_SETS:
        entries[name] = json.loads((TEXT2SQL / f"{name}.json").read_text())
        if name in TEXT2SQL_DATABASES:
            per_set[name], per_values[name] = _sqlite_schema(TEXT2SQL / TEXT2SQL_DATABASES[name])
        else:
            per_set[name], per_values[name] = _derived_schema(entries[name])
    owners: dict[str, set[str]] = {}
    for name, found in per_set.items():
        for table in found:
            owners.setdefault(table, set()).add(name)
    tables: dict[str, TableInfo] = {}
    values: dict[tuple[str, str], list[str]] = {}
    names_of: dict[str, dict[str, str]] = {}
    columns_of: dict[str, dict[str, list[str]]] = {}
    for name, found in per_set.items():
        rename = {t: (f"{name}_{t}" if len(owners[t]) > 1 else t) for t in found}
        names_of[name] = rename
        for table, info in found.items():
            merged = info.model_copy(update={"name": rename[table]})
            merged.foreign_keys = [
                fk.model_copy(
                    update={"referred_table": rename.get(fk.referred_table, fk.referred_table)}
                )
                for fk in info.foreign_keys
            ]
            tables[merged.name] = merged
        for (table, column), found_values in per_values[name].items():
            values[(rename[table], column)] = found_values
        columns_of[name] = {
            rename[t].lower(): [c.name.lower() for c in info.columns] for t, info in found.items()
        }
    cases = []
    for name in TEXT2SQL_SETS:
        for entry in entries[name]:
            tree = _parse(entry["sql"][0], "mysql")
            if tree is None:
                continue
            gold = _gold(tree, names_of[name])
            if not gold:
                continue
            compared = _comparisons(tree, _aliases(tree))
            for sentence in entry["sentences"]:
                variables = _variables(entry, sentence)
                question = _filled(sentence["text"], variables)
                filled = [(t, c, variables.get(lit.strip("%"), lit)) for t, c, lit in compared]
                links = _links(tree, filled, names_of[name], columns_of[name], question)
                cases.append(Case(question, name, gold, links))
    _mark_value_only(cases, tables)
    return Corpus(
        "text2sql-data",
        tables,
        cases,
        values,
        "GeoQuery and Restaurants schemas and values from their SQLite files; the other six "
        "schemas rebuilt from their gold SQL, values from the questions' variables and the SQL's "
        "text literals",
    )


def _sqlite_schema(path: Path) -> tuple[dict[str, TableInfo], dict[tuple[str, str], list[str]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables: dict[str, TableInfo] = {}
    values: dict[tuple[str, str], list[str]] = {}
    for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ):
        info = TableInfo(name=name.lower())
        for _, column, type_, _, _, pk in conn.execute(f'PRAGMA table_info("{name}")'):
            info.columns.append(
                ColumnInfo(name=column.lower(), type=(type_ or "").upper(), primary_key=bool(pk))
            )
            if "CHAR" in (type_ or "").upper() or "TEXT" in (type_ or "").upper():
                found = [
                    str(v)
                    for (v,) in conn.execute(
                        f'SELECT "{column}" FROM "{name}" WHERE "{column}" IS NOT NULL LIMIT 20000'
                    )
                ]
                if found:
                    values[(info.name, column.lower())] = found
        tables[info.name] = info
    conn.close()
    return tables, values


def _derived_schema(
    entries: list[dict],
) -> tuple[dict[str, TableInfo], dict[tuple[str, str], list[str]]]:
    columns: dict[str, dict[str, str]] = {}
    joins: set[tuple[str, str, str, str]] = set()
    values: dict[tuple[str, str], set[str]] = {}
    for entry in entries:
        for sql in entry["sql"]:
            tree = _parse(sql, "mysql")
            if tree is None:
                continue
            aliases = _aliases(tree)
            for table in aliases.values():
                columns.setdefault(table, {})
            for column in tree.find_all(exp.Column):
                table = aliases.get(column.table.lower()) if column.table else None
                if table is not None:
                    columns[table].setdefault(column.name.lower(), "")
            for eq in tree.find_all(exp.EQ):
                left, right = eq.left, eq.right
                if isinstance(left, exp.Column) and isinstance(right, exp.Column):
                    a, b = aliases.get(left.table.lower()), aliases.get(right.table.lower())
                    if a and b and a != b:
                        pair = sorted([(a, left.name.lower()), (b, right.name.lower())])
                        joins.add((*pair[0], *pair[1]))
            for table, column, literal in _comparisons(tree, aliases):
                if table not in columns:
                    continue
                columns[table][column] = "TEXT"
                found = [_variables(entry, s).get(literal.strip("%")) for s in entry["sentences"]]
                if not any(found):  # a literal written in the SQL itself is a stored value too
                    found = [literal.strip("%").strip()]
                for value in found:
                    if value and not _number(value):
                        values.setdefault((table, column), set()).add(value)
    tables = {
        name: TableInfo(
            name=name, columns=[ColumnInfo(name=c, type=t) for c, t in sorted(cols.items())]
        )
        for name, cols in sorted(columns.items())
    }
    for a, a_col, b, b_col in sorted(joins):
        tables[a].foreign_keys.append(
            ForeignKeyInfo(columns=[a_col], referred_table=b, referred_columns=[b_col])
        )
    return tables, {key: sorted(found) for key, found in values.items()}


def _variables(entry: dict, sentence: dict) -> dict[str, str]:
    found = {v["name"]: v["example"] for v in entry.get("variables", []) if v.get("example")}
    found.update({k: v for k, v in sentence.get("variables", {}).items() if v})
    return found


def _filled(text: str, variables: dict[str, str]) -> str:
    for name in sorted(variables, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(name)}\b", variables[name], text)
    return text


# -- both, as one schema ----------------------------------------------------------------------


#: text2sql-data sets whose database Spider has too (its own copy, under this database id).
SPIDER_TWINS = {
    "academic": "academic",
    "geography": "geo",
    "imdb": "imdb",
    "restaurants": "restaurants",
    "scholar": "scholar",
    "yelp": "yelp",
}
#: A table Spider's copy spells otherwise: (set, table) -> Spider's name.
TWIN_SPELLINGS = {("yelp", "neighborhood"): "neighbourhood"}


def _twins(first: Corpus, second: Corpus, owner: dict[str, str]) -> dict[str, str]:
    """text2sql-data table -> the same table of Spider's copy of its database, in ``first``."""
    by_db = {
        db["db_id"]: {n.lower(): n for n in db["table_names_original"]}
        for db in json.loads(SPIDER_TABLES.read_text())
    }
    lower = {name.lower(): name for name in first.tables}
    twin: dict[str, str] = {}
    for name in second.tables:
        owning = owner.get(name, "")
        db = SPIDER_TWINS.get(owning)
        if db is None:
            continue
        prefix = f"{owning}_"
        original = name[len(prefix) :] if name.lower().startswith(prefix) else name
        original = TWIN_SPELLINGS.get((owning, original.lower()), original)
        spider_original = by_db[db].get(original.lower())
        if spider_original is None:
            continue
        found = lower.get(f"{db}_{spider_original}".lower()) or lower.get(spider_original.lower())
        if found:
            twin[name] = found
    return twin


def merged(split: str, *, twins: bool = False) -> Corpus:
    """Spider's and text2sql-data's merged schemas as one catalogue, asked both corpora's
    questions (Spider's ``split``). Six text2sql-data sets (GeoQuery, Restaurants, Scholar,
    Yelp, IMDB, Academic) are databases Spider has a copy of: their questions are asked of
    Spider's copy (a table neither copy has, or with its columns, is kept), so one database is
    in the catalogue once, about 921 tables. ``twins`` keeps both copies, as earlier versions
    of this benchmark did (about 967 tables, where a question's gold names one copy and the
    other, the same table, counts as a miss). A text2sql-data table whose name a Spider table
    has is prefixed with its set's name (``geography_city``)."""
    first, second = spider(split), text2sql()
    taken = {name.lower() for name in first.tables}
    owner: dict[str, str] = {}
    for case in second.cases:
        for table in case.gold:
            owner.setdefault(table, case.database)
    twin = {} if twins else _twins(first, second, owner)
    rename = {
        name: (f"{owner.get(name, 'text2sql')}_{name}" if name.lower() in taken else name)
        for name in second.tables
        if name not in twin
    }
    clash = taken & {name.lower() for name in rename.values()}
    if clash:  # a prefixed name Spider has too would merge two tables
        raise ValueError(f"tables in both corpora after renaming: {sorted(clash)}")
    rename.update(twin)
    tables = dict(first.tables)
    for name, info in second.tables.items():
        if name in twin:
            continue
        copy = info.model_copy(update={"name": rename[name]})
        copy.foreign_keys = [
            fk.model_copy(
                update={"referred_table": rename.get(fk.referred_table, fk.referred_table)}
            )
            for fk in info.foreign_keys
        ]
        tables[copy.name] = copy
    values = dict(first.values)
    for (table, column), found in second.values.items():
        target = rename[table]
        spelled = {c.name.lower(): c.name for c in tables[target].columns}.get(column.lower())
        if spelled is not None:
            values.setdefault((target, spelled), []).extend(found)
    cases = list(first.cases) + [
        Case(
            case.question,
            case.database,
            {rename[t] for t in case.gold},
            [(rename.get(t, t), c, v) for t, c, v in case.links],
        )
        for case in second.cases
    ]
    _mark_value_only(cases, tables)
    return Corpus(
        f"Spider {split} + text2sql-data" + (" (both copies of six databases)" if twins else ""),
        tables,
        cases,
        values,
        f"{first.note}; {second.note}",
    )


# -- shared ------------------------------------------------------------------------------------


def _parse(sql: str, dialect: str) -> exp.Expression | None:
    try:
        return sqlglot.parse_one(sql, read=dialect)
    except Exception:
        return None


def _gold(tree: exp.Expression, names: dict[str, str]) -> set[str]:
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    found = {t.name.lower() for t in tree.find_all(exp.Table)} - ctes
    return {names[n] for n in found if n in names}


def _aliases(tree: exp.Expression) -> dict[str, str]:
    """alias (and name) -> lower-cased table name, over the whole statement."""
    out: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        out[table.name.lower()] = table.name.lower()
        if table.alias:
            out[table.alias.lower()] = table.name.lower()
    return out


def _comparisons(tree: exp.Expression, aliases: dict[str, str]) -> list[tuple[str, str, str]]:
    """(table, column, literal) of each column compared with a text literal."""
    out = []
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.Like, exp.ILike, exp.In):
        column = node.this if isinstance(node, exp.In) else node.left
        if not isinstance(column, exp.Column):
            continue
        literals = node.expressions if isinstance(node, exp.In) else [node.expression]
        for literal in literals:
            if isinstance(literal, exp.Literal) and literal.is_string:
                table = aliases.get(column.table.lower()) if column.table else None
                out.append((table or "", column.name.lower(), literal.this))
    return out


def _links(
    tree: exp.Expression,
    compared: list[tuple[str, str, str]],
    names: dict[str, str],
    columns: dict[str, list[str]],
    question: str,
) -> list[tuple[str, str, str]]:
    """Value links: comparisons with a text literal the question contains (tables resolved)."""
    gold = [names[t] for t in {t.name.lower() for t in tree.find_all(exp.Table)} if t in names]
    lowered = question.lower()
    out = []
    for table, column, literal in compared:
        text = literal.strip("%").strip()
        if len(text) < 2 or text.lower() not in lowered:
            continue
        merged = names.get(table) if table else None
        if merged is None:  # unqualified: the gold table that has the column
            merged = next((t for t in gold if column in columns.get(t.lower(), [])), None)
        if merged is not None:
            out.append((merged, column, text))
    return out


def _mark_value_only(cases: list[Case], tables: dict[str, TableInfo]) -> None:
    terms: dict[str, set[str]] = {}
    for name, info in tables.items():
        found = set(identifier_terms(name))
        for column in info.columns:
            found.update(identifier_terms(column.name))
        terms[name] = found
    for case in cases:
        words = set(question_words(case.question))
        linked = {t for t, _, _ in case.links}
        case.value_only = any(t in case.gold and not (terms[t] & words) for t in linked)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
