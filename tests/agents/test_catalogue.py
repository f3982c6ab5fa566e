import doctest

import pytest
import sqlalchemy as sa

import agents
import agents.catalogue
from agents.catalogue import (
    BATCH_FACTOR,
    DEFAULT_MAX_TABLES,
    LARGE_SCHEMA_TABLES,
    Catalogue,
    batch_catalogue,
    build_catalogue,
    compact_catalogue,
    index_for,
    rank_tables,
)
from agents.linking import SchemaIndex, Synonyms
from agents.schema_explorer import ColumnInfo, ForeignKeyInfo, SchemaExplorer, TableInfo
from tests.fixtures.erp_db import ERP_QUESTIONS, build_erp_database


def table(name: str, *columns: str, fks: dict[str, str] | None = None) -> TableInfo:
    return TableInfo(
        name=name,
        columns=[
            ColumnInfo(name=c, type="INTEGER" if c.endswith("_id") else "VARCHAR(40)")
            for c in columns
        ],
        primary_key=[columns[0]] if columns else [],
        foreign_keys=[
            ForeignKeyInfo(columns=[c], referred_table=t, referred_columns=[c])
            for c, t in (fks or {}).items()
        ],
    )


def schema(*tables: TableInfo) -> dict[str, TableInfo]:
    return {t.name: t for t in tables}


def big_schema() -> dict[str, TableInfo]:
    """A shop (orders, lines, products, customers) among 60 unrelated, unmatched tables."""
    tables = schema(
        table("customer", "customer_id", "full_name"),
        table("orders", "order_id", "customer_id", "placed", fks={"customer_id": "customer"}),
        table("order_line", "order_id", "product_id", "qty", fks={"order_id": "orders"}),
        table("product", "product_id", "title", "price"),
        table("warehouse", "warehouse_id", "city"),
        table("stock", "product_id", "warehouse_id", fks={"warehouse_id": "warehouse"}),
    )
    tables["order_line"].foreign_keys.append(
        ForeignKeyInfo(
            columns=["product_id"], referred_table="product", referred_columns=["product_id"]
        )
    )
    tables["stock"].foreign_keys.append(
        ForeignKeyInfo(
            columns=["product_id"], referred_table="product", referred_columns=["product_id"]
        )
    )
    for i in range(60):
        tables[f"aa_filler_{i:02d}"] = table(f"aa_filler_{i:02d}", f"zz_{i}_id", f"blob_{i}")
    return tables


@pytest.fixture(scope="module")
def erp_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TableInfo]:
    path = build_erp_database(tmp_path_factory.mktemp("erp") / "erp.sqlite")
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        return SchemaExplorer(engine, cache_key=f"catalogue-test:{path}").tables()
    finally:
        engine.dispose()


def test_catalogue_object_says_what_was_shown_named_and_left_out() -> None:
    tables = big_schema()
    ticks = iter([1.0, 1.25])
    cat = build_catalogue(
        ["total price of each customer's orders"], tables, clock=lambda: next(ticks)
    )
    assert isinstance(cat, Catalogue)
    assert not cat.whole_schema
    assert cat.shown[0] in {"orders", "customer"}
    assert {"orders", "customer", "product"} <= set(cat.shown)
    assert not any(name.startswith("aa_filler") for name in cat.shown + cat.named)
    assert set(cat.scores) == set(cat.shown) and all(s > 0 for s in cat.scores.values())
    assert cat.unlisted == len(tables) - len(cat.shown) - len(cat.named)
    assert cat.ranking_ms == pytest.approx(250.0)
    lines = cat.text.splitlines()
    # the best tables with their columns' types; the rest of the shown ones with names only
    assert lines[0] == tables[cat.shown[0]].catalogue_line()
    assert all(
        line in (tables[n].catalogue_line(), tables[n].compact_line())
        for line, n in zip(lines, cat.shown, strict=False)
    )


def test_names_line_lists_the_next_ranked_and_the_neighbours_and_states_the_rule() -> None:
    tables = big_schema()
    cat = build_catalogue(["customers"], tables, max_tables=1)
    assert cat.shown == ["customer"]
    assert cat.named == ["orders", "order_line"]  # ranked next (orders refers to customer)
    lines = cat.text.splitlines()
    assert lines[1] == "-- 2 more tables, columns not shown: orders, order_line"
    assert lines[2].startswith(f"-- {len(tables) - 3} other tables are not listed")
    assert "a plan may still name any table of the database" in lines[2]


def test_no_alphabetical_filler_when_a_question_matches_little() -> None:
    tables = big_schema()
    cat = build_catalogue(["warehouses"], tables)
    assert not any(name.startswith("aa_filler") for name in cat.shown)
    assert cat.shown[0] == "warehouse"


def test_a_question_matching_nothing_gets_a_map_of_the_schema_not_the_same_hubs() -> None:
    tables = big_schema()
    nothing = build_catalogue(["what is the meaning of life"], tables, max_named=4)
    assert nothing.shown == []
    # one table per foreign-key-connected part, the largest part's most connected table first
    assert nothing.named == ["orders", "aa_filler_00", "aa_filler_01", "aa_filler_02"]
    assert nothing.text.startswith(
        "-- nothing in the question matches a table; 4 tables, one per part of the schema: "
    )
    assert rank_tables("what is the meaning of life", tables, limit=2) == ["orders", "aa_filler_00"]
    # a word that only shares its first letters with a schema word still finds it
    assert build_catalogue(["warehousing costs"], tables).shown[0] == "warehouse"


def test_rank_tables_orders_by_relevance_and_honours_the_limit() -> None:
    tables = big_schema()
    assert rank_tables("order lines and their quantity", tables, limit=1) == ["order_line"]
    assert rank_tables("order lines", tables, limit=0) == []
    assert rank_tables("order lines", tables, index=SchemaIndex(tables)) == rank_tables(
        "order lines", tables
    )


def test_budget_in_characters_limits_wide_tables() -> None:
    tables = big_schema()
    question = "customer orders of products"
    full = build_catalogue([question], tables)
    first = len(tables[full.shown[0]].catalogue_line())
    tight = build_catalogue([question], tables, max_chars=first + 1)
    assert tight.shown == full.shown[:1]
    assert build_catalogue([question], tables, max_chars=1).shown == full.shown[:1]


def test_batch_catalogue_merges_each_questions_best_within_a_larger_budget() -> None:
    tables = big_schema()
    questions = ["customers", "warehouses", "product prices"]
    cat = build_catalogue(questions, tables, max_tables=2)
    assert cat.shown[:3] == ["customer", "warehouse", "product"]
    assert len(cat.shown) == 2 * BATCH_FACTOR
    assert batch_catalogue(questions[:1], tables) == compact_catalogue(questions[0], tables)
    assert len(build_catalogue(questions, tables, max_tables=1).shown) == BATCH_FACTOR


def test_small_schema_catalogue_is_unchanged(demo_engine: sa.Engine) -> None:
    explorer = SchemaExplorer(demo_engine)
    assert compact_catalogue("revenue per region", explorer.tables()) == explorer.catalogue()
    assert batch_catalogue(["a", "b"], explorer.tables()) == explorer.catalogue()
    cat = build_catalogue(["a"], explorer.tables())
    assert cat.whole_schema and cat.shown == list(explorer.tables()) and cat.unlisted == 0


def test_threshold_is_inclusive_and_defined_once() -> None:
    assert agents.LARGE_SCHEMA_TABLES is LARGE_SCHEMA_TABLES
    tables = schema(
        *(table(f"table_{i:02d}", "id", f"col_{i}") for i in range(LARGE_SCHEMA_TABLES))
    )
    whole = "\n".join(t.catalogue_line() for t in tables.values())
    assert compact_catalogue("col 7", tables) == whole
    tables["table_40"] = table("table_40", "id", "col_40")
    assert compact_catalogue("col 7", tables) != whole + "\n" + tables["table_40"].catalogue_line()
    assert compact_catalogue("col 7", tables, always_include_all_below=LARGE_SCHEMA_TABLES + 1) == (
        whole + "\n" + tables["table_40"].catalogue_line()
    )


def test_index_is_built_once_per_schema_mapping() -> None:
    tables = schema(table("items", "item_id"), table("orders", "order_id"))
    first = index_for(tables)
    assert index_for(tables) is first
    assert index_for(dict(tables)) is not first
    tables["lines"] = table("lines", "line_id")
    assert index_for(tables) is not first
    assert rank_tables("lines", tables, limit=1) == ["lines"]
    rows = Synonyms({"row": ["line"]})
    assert index_for(tables, rows).rank("rows") == ["lines"]
    assert index_for(tables, rows) is index_for(tables, rows)
    assert index_for(tables, rows) is not index_for(tables)


def test_large_fixture_schema_is_pruned_to_a_fraction(erp_tables: dict[str, TableInfo]) -> None:
    whole = len("\n".join(t.catalogue_line() for t in erp_tables.values()))
    questions = [q for q, _ in ERP_QUESTIONS[:10]]
    for question in questions:
        cat = build_catalogue([question], erp_tables)
        assert len(cat.shown) <= DEFAULT_MAX_TABLES
        assert len(cat.text) < 0.15 * whole
    first = compact_catalogue(questions[0], erp_tables)
    assert compact_catalogue(questions[0], dict(erp_tables)) == first
    assert compact_catalogue(questions[0], erp_tables, index=SchemaIndex(erp_tables)) == first


def test_public_names() -> None:
    assert agents.catalogue.__all__ == sorted(agents.catalogue.__all__)
    assert agents.__all__ == sorted(agents.__all__)
    for name in ("batch_catalogue", "rank_tables", "DEFAULT_MAX_TABLES", "build_catalogue"):
        assert name in agents.__all__


def test_docstring_examples_run() -> None:
    assert doctest.testmod(agents.catalogue).failed == 0


def test_no_product_code_names_a_fixture_table_or_prefix() -> None:
    """The ranker generalises from what a schema says: no table name of the ERP test fixture, and
    no module prefix of it used as a word of its own (``"crm"``, ``gl_``), appears in product code."""
    import re
    from pathlib import Path

    from tests.fixtures.erp_db import _PREFIXES, erp_tables

    root = Path(__file__).resolve().parents[2]
    tables = {t.name for t in erp_tables()}
    names = "|".join(sorted(_PREFIXES))
    prefix = re.compile(rf"""["']({names})_?["']|\b({names})_\b""")
    offenders = []
    for package in ("agents", "orchestrator", "safety", "approvals", "ratelimit"):
        for path in (root / package).rglob("*.py"):
            text = path.read_text()
            words = set(re.findall(r"[a-z][a-z0-9_]+", text))
            named = sorted(words & tables)
            if named or prefix.search(text):
                offenders.append((str(path.relative_to(root)), named[:5]))
    assert offenders == []


def look_alikes(count: int) -> dict[str, TableInfo]:
    """``count`` tables that all match "widget" alike, each with a few other columns."""
    return schema(
        *(
            table(f"widget_{i:03d}", f"widget_{i:03d}_id", "colour", "weight", "batch_no", "note")
            for i in range(count)
        )
    )


def test_a_flat_ranking_shows_more_candidates_by_their_keys() -> None:
    tables = look_alikes(150)
    cat = build_catalogue(["How many widgets are there?"], tables)
    # more than max_tables, the ones below the first rows by their key columns only
    assert len(cat.shown) > DEFAULT_MAX_TABLES
    lines = cat.text.splitlines()
    whole = agents.catalogue.FLAT_WHOLE_ROWS
    assert all(line.endswith("more columns)") for line in lines[whole : len(cat.shown)])
    assert not any(line.endswith("more columns)") for line in lines[:whole])
    assert lines[whole] == f"{cat.shown[whole]}({cat.shown[whole]}_id, ... 4 more columns)"
    assert len(cat.text) <= agents.catalogue.DEFAULT_MAX_CHARS


def test_a_sharp_ranking_shows_few_tables_and_names_more() -> None:
    tables = look_alikes(150)
    tables["comet"] = table("comet", "comet_id", "discovered_on", "orbit_days")
    flat = build_catalogue(["How many widgets are there?"], tables)
    sharp = build_catalogue(["When was each comet discovered?"], tables)
    assert sharp.shown[0] == "comet"
    assert len(sharp.shown) <= agents.catalogue.SHARP_MAX_TABLES < len(flat.shown)
    assert not any(line.endswith("more columns)") for line in sharp.text.splitlines())


def test_a_hint_counts_for_the_ranking_like_the_question() -> None:
    tables = big_schema()
    question = "How many loyal buyers do we have?"
    alone = build_catalogue([question], tables)
    assert "customer" not in alone.shown[:1]
    hinted = build_catalogue([question], tables, hints=["buyers are the rows of customer"])
    assert hinted.shown[0] == "customer"
    # one hint per question, in order; an empty one changes nothing
    both = build_catalogue([question, question], tables, hints=["", "a warehouse city"])
    assert "warehouse" in both.shown
    assert build_catalogue([question], tables, hints=[" "]).text == alone.text
