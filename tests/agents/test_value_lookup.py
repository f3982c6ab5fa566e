"""Label columns with too many values to index are searched in the database at ask time."""

from __future__ import annotations

import doctest
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

import agents.linking.lookup
from agents.catalogue import build_catalogue
from agents.linking import SchemaIndex, ValueIndex
from agents.schema_explorer import SchemaExplorer

FIRST = ["Ada", "Bram", "Cleo", "Dov", "Eli", "Fen", "Gus", "Hal", "Ivo", "Jun"]


def _people_db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    for i in range(60):
        conn.execute(f"CREATE TABLE ledger_{i} (ledger_{i}_id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("CREATE TABLE member (member_id INTEGER PRIMARY KEY, full_name TEXT)")
    conn.execute(
        "CREATE TABLE post (post_id INTEGER PRIMARY KEY, member_id INTEGER "
        "REFERENCES member(member_id), body TEXT)"
    )
    names = [(i, f"{FIRST[i % 10]} Member{i:05d}") for i in range(3000)]
    names.append((3000, "Roni Kessler"))
    names.append((3001, "Pinar del Río"))  # accents: LIKE does not fold them
    names.append((3002, "Barddhaman (Burdwan)"))  # punctuation between the words
    conn.executemany("INSERT INTO member VALUES (?, ?)", names)
    conn.commit()
    conn.close()
    return path


@pytest.fixture()
def people(tmp_path: Path):  # noqa: ANN201
    engine = sa.create_engine(f"sqlite:///{_people_db(tmp_path / 'people.sqlite')}")
    yield engine
    engine.dispose()


def test_doctests() -> None:
    assert doctest.testmod(agents.linking.lookup).failed == 0


def test_a_name_in_a_column_too_large_to_index_is_found(people: sa.Engine) -> None:
    tables = SchemaExplorer(people, cache_key="lookup-test").tables()
    values = ValueIndex.build(people, tables)
    assert ("member", "full_name") in values.wide  # 3,001 names: not kept in memory
    assert values.matches("Tell me everything about Roni.") == []
    index = SchemaIndex(tables)
    assert index.rank("Tell me everything about Roni.") == []
    cat = build_catalogue(["Tell me everything about Roni."], tables, index=index, values=values)
    assert cat.shown[:1] == ["member"]
    assert "'Roni Kessler' -> member.full_name" in cat.text


def test_the_policy_and_the_time_budget_bound_the_search(people: sa.Engine) -> None:
    tables = SchemaExplorer(people, cache_key="lookup-test-2").tables()
    values = ValueIndex.build(people, tables)
    denied = values.search(
        "about Roni", lambda t, c: (t, c) != ("member", "full_name"), known=lambda w: False
    )
    assert denied == []
    assert values.search("about Roni", known=lambda w: False, budget_s=0.0) == []
    found = values.search("about Roni", known=lambda w: False)
    assert [(m.table, m.column, m.value) for m in found] == [
        ("member", "full_name", "Roni Kessler")
    ]
    # words the schema covers are not searched: "member" is a table's word
    assert values.search("member", known=lambda w: w == "member") == []


def test_values_with_accents_or_punctuation_are_found_as_the_question_writes_them(
    people: sa.Engine,
) -> None:
    tables = SchemaExplorer(people, cache_key="lookup-test-3").tables()
    values = ValueIndex.build(people, tables)
    for question, stored in (
        ("Who is Pinar del Río?", "Pinar del Río"),
        ("Tell me about Barddhaman (Burdwan).", "Barddhaman (Burdwan)"),
        ("Tell me about Barddhaman Burdwan.", "Barddhaman (Burdwan)"),
    ):
        found = values.search(question, known=lambda w: False)
        assert [(m.table, m.value) for m in found] == [("member", stored)], question
    # words in another order, or only some of them, are not a match
    assert values.search("Tell me about Burdwan Barddhaman.", known=lambda w: False) == []


def test_every_engine_searches_case_insensitively(shop_engine: sa.Engine) -> None:
    """SQLite and MySQL LIKE, PostgreSQL and DuckDB ILIKE: 1,500 names, one asked for in
    another case."""
    rows = ", ".join(f"({i}, 'Person {i:05d}')" for i in range(1, 1501))
    with shop_engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE member (member_id INTEGER PRIMARY KEY, full_name VARCHAR(80))"
        )
        conn.exec_driver_sql(f"INSERT INTO member VALUES {rows}")
        conn.exec_driver_sql("INSERT INTO member VALUES (1501, 'Roni Kessler')")
        conn.exec_driver_sql("INSERT INTO member VALUES (1502, 'Pinar del Río')")
    tables = SchemaExplorer(shop_engine).tables()
    values = ValueIndex.build(shop_engine, tables)
    assert ("member", "full_name") in values.wide
    found = values.search("who is RONI kessler", known=lambda w: False)
    assert [(m.table, m.value, m.phrase) for m in found] == [
        ("member", "Roni Kessler", "roni kessler")
    ]
    found = values.search("who is PINAR del Río", known=lambda w: False)
    assert [(m.table, m.value) for m in found] == [("member", "Pinar del Río")]
