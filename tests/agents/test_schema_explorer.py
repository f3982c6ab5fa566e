import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.errors import SchemaInspectionError
from agents.schema_explorer import (
    SchemaContext,
    SchemaExplorer,
    TableInfo,
    clear_schema_cache,
    dialect_name,
)

SHOP_TABLES = {"audit_log", "customer", "purchase", "purchase_line", "region"}


def test_reads_tables_columns_and_keys_on_every_backend(shop_engine: sa.Engine) -> None:
    se = SchemaExplorer(shop_engine)
    assert SHOP_TABLES <= set(se.table_names())

    purchase = se.table("purchase")
    assert purchase is not None
    assert purchase.primary_key == ["purchase_id"]
    assert purchase.column_names() == ["purchase_id", "customer_id", "amount", "note", "created"]
    assert purchase.column("customer_id").nullable is False
    assert purchase.column("note").nullable is True
    assert purchase.column("purchase_id").primary_key is True
    assert (
        "NUMERIC" in purchase.column("amount").type.upper()
        or "DECIMAL" in purchase.column("amount").type.upper()
    )
    assert [fk.model_dump() for fk in purchase.foreign_keys] == [
        {
            "columns": ["customer_id"],
            "referred_table": "customer",
            "referred_columns": ["customer_id"],
        }
    ]

    line = se.table("purchase_line")
    assert line.primary_key == ["purchase_id", "line_no"]

    view = se.table("big_purchase")
    assert view.kind == "view"
    assert view.column_names() == ["purchase_id", "amount"]
    assert view.render(se.dialect).startswith("CREATE VIEW big_purchase (")


def test_explore_adds_neighbours_in_both_directions(shop_engine: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_engine).explore(["customer"])
    assert ctx.requested == ["customer"]
    # customer -> region (outgoing), purchase -> customer (incoming); not purchase_line or audit_log
    assert ctx.neighbours == ["purchase", "region"]
    assert [t.name for t in ctx.tables] == ["customer", "purchase", "region"]
    assert ctx.unknown_tables == []


def test_explore_outgoing_only_and_again_after_a_new_read(shop_engine: sa.Engine) -> None:
    explorer = SchemaExplorer(shop_engine)
    assert explorer.explore(["customer"], incoming=False).neighbours == ["region"]
    assert explorer.explore(["purchase"], incoming=False).neighbours == ["customer"]
    with shop_engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE loyalty (id INTEGER PRIMARY KEY, customer_id INTEGER, "
            "FOREIGN KEY (customer_id) REFERENCES customer (customer_id))"
        )
    explorer.tables(refresh=True)
    assert explorer.explore(["customer"]).neighbours == ["loyalty", "purchase", "region"]


def test_explore_without_neighbours(shop_sqlite: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_sqlite).explore(["customer"], neighbours=False)
    assert [t.name for t in ctx.tables] == ["customer"]


def test_unknown_tables_are_ignored_and_listed(shop_sqlite: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_sqlite).explore(["nope", "region", "nope", "customers_typo"])
    assert ctx.requested == ["region"]
    assert ctx.unknown_tables == ["nope", "customers_typo"]
    assert "-- no such tables: nope, customers_typo" in ctx.render()


def test_table_matching_ignores_case_quotes_and_schema_prefix(shop_sqlite: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_sqlite).explore(
        ["CUSTOMER", '"Region"', "main.purchase", "`audit_log`"], neighbours=False
    )
    assert ctx.requested == ["customer", "region", "purchase", "audit_log"]
    assert ctx.table("PURCHASE").name == "purchase"
    assert ctx.table("purchase").column("AMOUNT").name == "amount"


def test_explore_none_means_every_table(shop_sqlite: sa.Engine) -> None:
    ctx = SchemaExplorer(shop_sqlite).explore(None)
    assert set(ctx.requested) == SHOP_TABLES | {"big_purchase"}
    assert ctx.neighbours == []


def test_render_is_create_table_like(shop_sqlite: sa.Engine) -> None:
    text = SchemaExplorer(shop_sqlite).explore(["purchase_line"], neighbours=False).render()
    assert text == (
        "CREATE TABLE purchase_line (\n"
        "  purchase_id INTEGER NOT NULL REFERENCES purchase(purchase_id),\n"
        "  line_no INTEGER NOT NULL,\n"
        "  qty INTEGER,\n"
        "  PRIMARY KEY (purchase_id, line_no)\n"
        ");"
    )
    customer = SchemaExplorer(shop_sqlite).explore(["customer"], neighbours=False).render()
    assert "  customer_id INTEGER PRIMARY KEY,\n" in customer
    assert "  region_id INTEGER REFERENCES region(region_id),\n" in customer


def test_render_quotes_names_that_need_it(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'odd.sqlite'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            'CREATE TABLE "order" ("select" INTEGER PRIMARY KEY, "Unit Price" REAL, untyped)'
        )
        conn.exec_driver_sql(
            'CREATE VIEW big_orders AS SELECT "select" FROM "order" WHERE "Unit Price" > 10'
        )
    se = SchemaExplorer(engine)
    text = se.render()
    assert (
        'CREATE TABLE "order" (\n  "select" INTEGER PRIMARY KEY,\n  "Unit Price" REAL,\n  untyped\n);'
        in text
    )
    assert "CREATE VIEW big_orders (" in text
    assert se.table("big_orders").kind == "view"


def test_catalogue_has_one_line_per_table(demo_engine: sa.Engine) -> None:
    lines = SchemaExplorer(demo_engine).catalogue().splitlines()
    assert len(lines) == 7
    assert (
        "orders(order_id INTEGER, customer_id INTEGER, employee_id INTEGER, order_date DATE, "
        "shipped_date DATE, status VARCHAR(20))" in lines
    )


def test_demo_database_self_reference_and_hub(demo_engine: sa.Engine) -> None:
    se = SchemaExplorer(demo_engine)
    employees = se.explore(["employees"])
    # the manager_id self-reference is not a neighbour of itself
    assert employees.neighbours == ["orders", "regions"]
    assert "manager_id INTEGER REFERENCES employees(employee_id)" in employees.render()
    orders = se.explore(["orders"])
    assert orders.neighbours == ["customers", "employees", "order_items"]


def test_context_is_json_serialisable_and_round_trips(demo_engine: sa.Engine) -> None:
    ctx = SchemaExplorer(demo_engine).explore(["order_items", "ghost"])
    again = SchemaContext.model_validate_json(ctx.model_dump_json())
    assert again == ctx
    assert json.loads(ctx.model_dump_json())["unknown_tables"] == ["ghost"]
    assert ctx.columns_by_table()["order_items"][:3] == ["order_item_id", "order_id", "product_id"]
    assert (
        ctx.summary() == "1 planned (order_items), 2 neighbours (orders, products), unknown: ghost"
    )
    assert isinstance(ctx.tables[0], TableInfo)
    assert ctx.tables[0].summary() == "order_items: 6 columns, pk=['order_item_id'], 2 fks"


def test_schema_is_cached_per_database(shop_sqlite: sa.Engine, tmp_path: Path) -> None:
    first = SchemaExplorer(shop_sqlite)
    assert "late" not in first.table_names()
    with shop_sqlite.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE late (id INTEGER PRIMARY KEY)")
    # a new explorer on the same database reuses the cached schema
    assert "late" not in SchemaExplorer(shop_sqlite).table_names()
    assert "late" in SchemaExplorer(shop_sqlite).tables(refresh=True)
    clear_schema_cache()
    assert "late" in SchemaExplorer(shop_sqlite).table_names()
    # another cache key is another database
    other = sa.create_engine(f"sqlite:///{tmp_path / 'other.sqlite'}")
    assert SchemaExplorer(other).table_names() == []


def test_cache_key_names_the_database(shop_sqlite: sa.Engine, tmp_path: Path) -> None:
    empty = sa.create_engine(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    SchemaExplorer(shop_sqlite, cache_key="shop").table_names()
    assert set(SchemaExplorer(empty, cache_key="shop").table_names()) == SHOP_TABLES | {
        "big_purchase"
    }


def test_default_cache_key_hides_the_password() -> None:
    engine = sa.create_engine("postgresql+psycopg://alice:s3cret@db.invalid/shop")
    se = SchemaExplorer(engine)
    assert "s3cret" not in se.cache_key
    assert se.dialect == "postgres"


def test_dialect_names_follow_sqlglot(tmp_path: Path) -> None:
    assert dialect_name(sa.create_engine("sqlite://")) == "sqlite"
    assert dialect_name(sa.create_engine(f"duckdb:///{tmp_path / 'x.duckdb'}")) == "duckdb"
    assert dialect_name(sa.create_engine("mysql+pymysql://u@h.invalid/db")) == "mysql"


def test_unreachable_database_raises_a_clear_error(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.sqlite'}")
    with pytest.raises(SchemaInspectionError) as info:
        SchemaExplorer(engine).table_names()
    assert info.value.code == "database_unreachable"
    assert info.value.message == "unable to open database file"


def test_explicit_db_schema_on_postgres(postgres_engine: sa.Engine) -> None:
    with postgres_engine.connect() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
    plain = sa.create_engine(postgres_engine.url)
    try:
        ctx = SchemaExplorer(plain, db_schema=schema).explore(["purchase"])
        assert ctx.db_schema == schema
        assert ctx.neighbours == ["customer", "purchase_line"]
    finally:
        plain.dispose()


def test_through_a_read_only_engine(demo_path: Path) -> None:
    from safety import open_readonly_engine

    engine = open_readonly_engine(f"sqlite:///{demo_path}")
    try:
        ctx = SchemaExplorer(engine).explore(["order_items"])
    finally:
        engine.dispose()
    assert ctx.neighbours == ["orders", "products"]
    assert ctx.table("orders").primary_key == ["order_id"]


def test_data_explorer_follows_the_context_schema_on_postgres(postgres_engine: sa.Engine) -> None:
    from agents.data_explorer import DataExplorer

    with postgres_engine.connect() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
    plain = sa.create_engine(
        postgres_engine.url
    )  # default search_path: the tables are not visible unqualified
    try:
        ctx = SchemaExplorer(plain, db_schema=schema).explore(["customer"])
        dc = DataExplorer(plain, sample_rows=1).explore([("customer", "segment")], schema=ctx)
    finally:
        plain.dispose()
    assert dc.columns[0].values == ["Consumer", "Enterprise"]
    assert dc.samples[0].rows == [[1, "Ada", 1, "Consumer"]]


def test_sampled_values_of_short_text_columns_on_every_backend(shop_engine: sa.Engine) -> None:
    tables = SchemaExplorer(shop_engine, sample_values=5).tables()
    assert sorted(tables["region"].column("name").values) == ["North", "South", "West"]
    assert sorted(tables["customer"].column("segment").values) == ["Consumer", "Enterprise"]
    assert tables["customer"].column("customer_id").values == []  # not text
    assert tables["purchase"].column("amount").values == []


def test_sampling_is_bounded_and_cached_with_the_schema(shop_sqlite: sa.Engine) -> None:
    explorer = SchemaExplorer(shop_sqlite, sample_values=2)
    assert len(explorer.tables()["customer"].column("name").values) == 2
    assert explorer.tables() is explorer.tables()
    # without sampling: a separate cache entry, no values
    assert SchemaExplorer(shop_sqlite).tables()["region"].column("name").values == []


def test_long_text_values_are_not_kept(shop_sqlite: sa.Engine) -> None:
    with shop_sqlite.begin() as conn:
        conn.exec_driver_sql("INSERT INTO audit_log VALUES (1, '" + "x" * 80 + "'), (2, 'ok')")
    tables = SchemaExplorer(shop_sqlite, sample_values=5).tables()
    assert tables["audit_log"].column("message").values == ["ok"]


def test_comments_are_read_on_postgres(postgres_engine: sa.Engine) -> None:
    with postgres_engine.begin() as conn:
        conn.exec_driver_sql("COMMENT ON TABLE region IS 'sales territories'")
        conn.exec_driver_sql("COMMENT ON COLUMN customer.segment IS 'market tier'")
    tables = SchemaExplorer(postgres_engine).tables()
    assert tables["region"].comment == "sales territories"
    assert tables["customer"].column("segment").comment == "market tier"
    assert tables["customer"].comment is None
    assert tables["customer"].column("name").comment is None
