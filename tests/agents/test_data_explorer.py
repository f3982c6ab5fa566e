import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.data_explorer import DataContext, DataExplorer
from agents.errors import ExecutionError
from agents.schema_explorer import SchemaExplorer


def test_distinct_values_on_every_backend(shop_engine: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_engine).explore(["customer"])
    dc = DataExplorer(shop_engine).explore(
        [("customer", "segment"), ("region", "name")], schema=ctx
    )
    segment, region = dc.columns
    assert (segment.table, segment.column) == ("customer", "segment")
    assert segment.values == ["Consumer", "Enterprise"]
    assert segment.has_nulls is True
    assert segment.truncated is False
    assert region.values == ["North", "South", "West"]
    assert region.has_nulls is False
    assert dc.skipped == []


def test_truncation_is_detected_with_one_extra_value(shop_engine: sa.Engine) -> None:
    dc = DataExplorer(shop_engine, sample_rows=0).explore([("purchase", "amount")])
    (amount,) = dc.columns
    assert amount.values == [5, 12.5, 42, 99.99]
    assert amount.truncated is False
    dc = DataExplorer(shop_engine, max_distinct=2, sample_rows=0).explore([("purchase", "amount")])
    (amount,) = dc.columns
    assert amount.values == [5, 12.5]
    assert amount.truncated is True
    assert (amount.minimum, amount.maximum) == (5, 99.99)


def test_exactly_max_distinct_values_is_not_truncated(shop_sqlite: sa.Engine) -> None:
    (name,) = (
        DataExplorer(shop_sqlite, max_distinct=3, sample_rows=0)
        .explore([("region", "name")])
        .columns
    )
    assert name.values == ["North", "South", "West"]
    assert name.truncated is False


def test_sample_rows_follow_the_primary_key(shop_engine: sa.Engine) -> None:
    dc = DataExplorer(shop_engine, sample_rows=2).explore(
        [("purchase", "note"), ("purchase", "amount")]
    )
    assert len(dc.samples) == 1
    sample = dc.samples[0]
    assert sample.table == "purchase"
    assert sample.columns == ["purchase_id", "customer_id", "amount", "note", "created"]
    assert sample.rows == [
        [1, 1, 12.5, "first: 100% paid", "2025-01-31"],
        [2, 1, 99.99, None, "2025-02-01"],
    ]


def test_only_existing_columns_are_explored(shop_sqlite: sa.Engine) -> None:
    dc = DataExplorer(shop_sqlite).explore(
        [
            ("customer", "segment"),
            ("customer", "segment; DROP TABLE customer"),
            ("ghost", "x"),
            ("CUSTOMER", "SEGMENT"),  # the same column again, other spelling
        ]
    )
    assert [(c.table, c.column) for c in dc.columns] == [("customer", "segment")]
    assert dc.skipped == [
        "customer.segment; DROP TABLE customer: no such column",
        "ghost.x: no such table",
    ]
    assert SchemaExplorer(shop_sqlite).table("customer") is not None


def test_filters_may_be_strings_or_plan_objects(shop_sqlite: sa.Engine) -> None:
    @dataclass
    class PlannedFilter:
        table: str
        column: str
        condition: str

    dc = DataExplorer(shop_sqlite, sample_rows=0).explore(
        ["region.name", PlannedFilter("customer", "segment", "= 'Consumer'")]
    )
    assert [c.column for c in dc.columns] == ["name", "segment"]


def test_tables_outside_the_context_are_found_in_the_database(shop_sqlite: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_sqlite).explore(["region"], neighbours=False)
    dc = DataExplorer(shop_sqlite, sample_rows=0).explore([("audit_log", "message")], schema=ctx)
    assert [c.table for c in dc.columns] == ["audit_log"]
    assert dc.columns[0].values == []


def test_identifiers_are_quoted_for_the_dialect(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'odd.sqlite'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            'CREATE TABLE "order" ("group" INTEGER PRIMARY KEY, "Unit Price" REAL)'
        )
        conn.exec_driver_sql('INSERT INTO "order" VALUES (1, 2.5), (2, 2.5), (3, NULL)')
    dc = DataExplorer(engine).explore([("order", "unit price")])
    (price,) = dc.columns
    assert price.column == "Unit Price"
    assert price.values == [2.5]
    assert price.has_nulls is True
    assert dc.samples[0].rows == [[1, 2.5], [2, 2.5], [3, None]]


def test_render_is_compact_and_stable(demo_engine: sa.Engine) -> None:
    ctx = SchemaExplorer(demo_engine).explore(["orders"])
    explorer = DataExplorer(demo_engine, sample_rows=2)
    dc = explorer.explore([("orders", "status"), ("orders", "order_date")], schema=ctx)
    text = dc.render()
    assert text.splitlines() == [
        "orders.status (VARCHAR(20)): 'cancelled', 'delivered', 'returned', 'shipped'",
        "orders.order_date (DATE): more than 20 distinct values, e.g. '2024-01-01', '2024-01-03', "
        "'2024-01-04', '2024-01-05', '2024-01-06'; range '2024-01-01' .. '2025-12-31'",
        "sample rows of orders:",
        "  order_id | customer_id | employee_id | order_date | shipped_date | status",
        "  1 | 75 | NULL | '2024-01-01' | NULL | 'cancelled'",
        "  2 | 130 | NULL | '2024-01-01' | '2024-01-02' | 'delivered'",
    ]
    assert (
        explorer.explore([("orders", "status"), ("orders", "order_date")], schema=ctx).render()
        == text
    )
    assert dc.summary() == "2 columns, 1 samples"


def test_nulls_and_quotes_in_render(shop_sqlite: sa.Engine) -> None:
    with shop_sqlite.begin() as conn:
        conn.exec_driver_sql("INSERT INTO region VALUES (4, 'O''Hare')")
    dc = DataExplorer(shop_sqlite, sample_rows=0).explore(
        [("region", "name"), ("customer", "segment")]
    )
    assert (
        dc.render() == "region.name (VARCHAR(40)): 'North', 'O''Hare', 'South', 'West'\n"
        "customer.segment (VARCHAR(20)): 'Consumer', 'Enterprise'; also NULL"
    )


def test_long_values_are_shortened(shop_sqlite: sa.Engine) -> None:
    with shop_sqlite.begin() as conn:
        conn.exec_driver_sql("INSERT INTO audit_log VALUES (1, '" + "x" * 300 + "')")
    dc = DataExplorer(shop_sqlite, max_value_chars=20).explore([("audit_log", "message")])
    assert dc.columns[0].values == ["x" * 17 + "..."]
    assert dc.samples[0].rows == [[1, "x" * 17 + "..."]]


def test_context_is_json_serialisable(demo_engine: sa.Engine) -> None:
    dc = DataExplorer(demo_engine).explore(
        [("products", "price"), ("employees", "hire_date"), ("nope", "x")]
    )
    assert DataContext.model_validate_json(dc.model_dump_json()) == dc
    assert json.loads(dc.model_dump_json())["skipped"] == ["nope.x: no such table"]


def test_nothing_to_explore_runs_no_query(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    dc = DataExplorer(engine).explore([("ghost", "x")])
    assert dc.columns == [] and dc.samples == []
    assert dc.render() == "not explored: ghost.x: no such table"


def test_a_failing_column_is_skipped_not_fatal(shop_sqlite: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_sqlite).explore(["region", "customer"], neighbours=False)
    # the context is stale: the table has since been dropped
    with shop_sqlite.begin() as conn:
        conn.exec_driver_sql("DROP TABLE region")
    dc = DataExplorer(shop_sqlite, sample_rows=0).explore(
        [("region", "name"), ("customer", "segment")], schema=ctx
    )
    assert [c.column for c in dc.columns] == ["segment"]
    assert dc.skipped == ["region.name: no such table: region"]


def test_unreachable_database(tmp_path: Path) -> None:
    ok = sa.create_engine(f"sqlite:///{tmp_path / 'shop.sqlite'}")
    with ok.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (c INTEGER)")
    ctx = SchemaExplorer(ok).explore(["t"])
    gone = sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'shop.sqlite'}")
    with pytest.raises(ExecutionError) as info:
        DataExplorer(gone).explore([("t", "c")], schema=ctx)
    assert info.value.code == "database_unreachable"


def test_through_a_read_only_engine(demo_path: Path) -> None:
    from safety import open_readonly_engine

    engine = open_readonly_engine(f"sqlite:///{demo_path}")
    try:
        dc = DataExplorer(engine, sample_rows=1).explore([("customers", "segment")])
    finally:
        engine.dispose()
    assert dc.columns[0].values == ["Consumer", "Enterprise", "Small Business"]
    assert dc.samples[0].rows[0][0] == 1
