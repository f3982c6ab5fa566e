"""The value index: a question naming only a value finds the table whose column holds it; the
index is bounded, never reads a column the policy hides, and is refreshed incrementally."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.catalogue import build_catalogue
from agents.linking import SchemaIndex, ValueIndex, ValueLimits
from agents.schema_explorer import SchemaExplorer, TableInfo
from orchestrator.core.database import TargetDatabase
from safety import Policy


def _racing(path: Path, fillers: int = 45) -> sa.Engine:
    """Races, drivers and results among unrelated tables, with rows."""
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        for ddl in (
            "CREATE TABLE races (race_id INTEGER PRIMARY KEY, year INTEGER, name TEXT, notes TEXT)",
            "CREATE TABLE drivers (driver_id INTEGER PRIMARY KEY, forename TEXT, surname TEXT, "
            "secret_code TEXT)",
            "CREATE TABLE results (result_id INTEGER PRIMARY KEY, "
            "race_id INTEGER REFERENCES races (race_id), "
            "driver_id INTEGER REFERENCES drivers (driver_id), position INTEGER)",
        ):
            conn.exec_driver_sql(ddl)
        for i, name in enumerate(
            ["San Marino Grand Prix", "Monaco Grand Prix", "Italian Grand Prix"]
        ):
            conn.exec_driver_sql(
                "INSERT INTO races VALUES (?, 2006, ?, ?)", (i + 1, name, "x" * 200)
            )
        conn.exec_driver_sql(
            "INSERT INTO drivers VALUES (1, 'Fernando', 'Alonso', 'ZX-1'), "
            "(2, 'Michael', 'Schumacher', 'ZX-2')"
        )
        conn.exec_driver_sql("INSERT INTO results VALUES (1, 1, 2, 1), (2, 1, 1, 2)")
        for i in range(fillers):
            conn.exec_driver_sql(f"CREATE TABLE filler_{i:02d} (id INTEGER, label TEXT)")
            conn.exec_driver_sql(f"INSERT INTO filler_{i:02d} VALUES (1, 'thing {i}')")
    return engine


@pytest.fixture
def racing(tmp_path: Path):
    engine = _racing(tmp_path / "racing.sqlite")
    yield engine, SchemaExplorer(engine, cache_key=f"values:{tmp_path}").tables()
    engine.dispose()


def test_a_value_only_question_finds_the_table_holding_the_value(racing) -> None:
    engine, tables = racing
    values = ValueIndex.build(engine, tables)
    question = "Who finished second in the San Marino Grand Prix?"
    found = values.matches(question)
    assert (found[0].table, found[0].column, found[0].value) == (
        "races",
        "name",
        "San Marino Grand Prix",
    )
    assert found[0].whole and found[0].phrase == "san marino grand prix"
    # the words of the question alone name no table; the value does
    assert "races" not in SchemaIndex(tables).rank(question)[:3]
    cat = build_catalogue([question], tables, values=values)
    assert {"races", "results"} <= set(cat.shown)
    assert cat.values == ["'San Marino Grand Prix' -> races.name"]
    assert "-- values named in the question: 'San Marino Grand Prix' -> races.name" in cat.text


def test_longer_phrases_win_and_a_word_of_a_value_counts_less(racing) -> None:
    engine, tables = racing
    values = ValueIndex.build(engine, tables)
    whole = values.matches("Monaco Grand Prix")
    assert [(m.value, m.whole) for m in whole] == [("Monaco Grand Prix", True)]
    word = values.matches("races won by Schumacher")
    assert [(m.table, m.column, m.whole) for m in word] == [("drivers", "surname", True)]
    partial = values.matches("the monaco race")
    assert [(m.value, m.whole) for m in partial] == [("Monaco Grand Prix", False)]
    assert partial[0].strength < whole[0].strength


def test_the_index_is_bounded_and_reads_no_column_it_may_not(racing) -> None:
    engine, tables = racing
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    readable = lambda table, column: column != "secret_code"  # noqa: E731
    values = ValueIndex.build(engine, tables, readable=readable)
    assert not any("secret_code" in sql for sql in statements)
    assert values.matches("ZX-1") == []
    assert all(len(m.value) <= 60 for m in values.matches("x" * 200))  # long text is not kept
    # a column with more distinct values than the bound holds free text or identifiers: skipped
    narrow = ValueIndex.build(engine, tables, limits=ValueLimits(per_column=2))
    assert narrow.matches("San Marino Grand Prix") == []
    assert narrow.matches("Schumacher")[0].column == "surname"
    assert narrow.skipped >= 1
    # the whole index keeps a bounded number of values: the per-column bound shrinks to fit
    tiny = ValueIndex.build(engine, tables, limits=ValueLimits(total=60))
    assert len(tiny) <= 60


def test_a_run_sees_only_the_values_of_columns_it_may_read(racing) -> None:
    engine, tables = racing
    values = ValueIndex.build(engine, tables)
    assert values.matches("Schumacher")
    assert values.matches("Schumacher", readable=lambda t, c: t != "drivers") == []


def test_refresh_reads_only_what_changed(racing) -> None:
    engine, tables = racing
    now = [1000.0]
    values = ValueIndex.build(engine, tables, clock=lambda: now[0])
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE drivers ADD COLUMN team TEXT")
        conn.exec_driver_sql("UPDATE drivers SET team = 'Ferrari' WHERE driver_id = 2")
        conn.exec_driver_sql("DROP TABLE filler_00")
    changed = SchemaExplorer(engine, cache_key="values-refresh").tables(refresh=True)
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    refreshed = values.refresh(engine, changed, clock=lambda: now[0])
    assert statements and all("drivers" in sql for sql in statements)  # only the changed table
    assert refreshed.matches("Ferrari")[0].column == "team"
    assert refreshed.matches("San Marino Grand Prix")  # kept without reading races again
    assert not any(m.table == "filler_00" for m in refreshed.matches("thing 0"))
    # values older than max_age are read again
    aging = ValueIndex.build(
        engine, changed, limits=ValueLimits(max_age_s=60), clock=lambda: now[0]
    )
    statements.clear()
    now[0] += 61
    aging.refresh(engine, changed, clock=lambda: now[0])
    assert any("races" in sql for sql in statements)


def test_the_target_database_builds_it_under_the_policy_and_filters_by_role(tmp_path: Path) -> None:
    engine = _racing(tmp_path / "racing.sqlite")
    engine.dispose()
    policy = Policy.from_toml_text(
        '[columns]\ndeny = ["drivers.secret_code"]\n[roles.stewards.tables]\ndeny = ["drivers"]\n'
    )
    database = TargetDatabase(f"sqlite:///{tmp_path / 'racing.sqlite'}", policy=policy)
    try:
        values = database.value_index()
        assert values is not None and values is database.value_index()  # built once
        assert values.matches("ZX-1") == []  # denied: never read
        assert values.matches("Alonso", readable=database.readable())[0].table == "drivers"
        steward = database.readable(database.policy_for("stewards"))
        assert values.matches("Alonso", readable=steward) == []
        off = TargetDatabase(f"sqlite:///{tmp_path / 'racing.sqlite'}", value_limits=None)
        assert off.value_index() is None
        off.dispose()
    finally:
        database.dispose()


def test_from_values_takes_values_at_hand() -> None:
    values = ValueIndex.from_values(
        {("customers", "segment"): ["Consumer", "Enterprise", "Consumer"], ("t", "n"): ["42"]}
    )
    assert len(values) == 2 and values.columns == 1  # numbers are not labels
    assert values.matches("enterprise accounts")[0].value == "Enterprise"


def test_tables_is_a_mapping_of_table_info(racing) -> None:
    _, tables = racing
    assert all(isinstance(info, TableInfo) for info in tables.values())


def test_values_are_read_on_every_engine(shop_engine: sa.Engine) -> None:
    tables = SchemaExplorer(shop_engine).tables()
    values = ValueIndex.build(shop_engine, tables, readable=lambda t, c: c != "note")
    assert [(m.table, m.column) for m in values.matches("sales in the West")] == [
        ("region", "name")
    ]
    assert values.matches("Enterprise customers")[0].column == "segment"
    assert values.matches("first: 100% paid") == []  # a column the predicate refuses
