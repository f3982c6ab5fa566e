import doctest
from pathlib import Path

import pytest
import sqlalchemy as sa

import agents.catalogue
from agents.catalogue import (
    DEFAULT_MAX_TABLES,
    CatalogueIndex,
    batch_catalogue,
    compact_catalogue,
    index_for,
    rank_tables,
    stem,
    words,
)
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


@pytest.fixture(scope="module")
def erp_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TableInfo]:
    path = build_erp_database(tmp_path_factory.mktemp("erp") / "erp.sqlite")
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        return SchemaExplorer(engine, cache_key=f"catalogue-test:{path}").tables()
    finally:
        engine.dispose()


def test_words_split_identifiers_and_sentences() -> None:
    assert words("supplierInvoice_no") == ["supplier", "invoice", "no"]
    assert words("over_90_amount") == ["over", "90", "amount"]
    assert words("Which customers owe us?") == ["which", "customers", "owe", "us"]


def test_stem_lets_plurals_and_verb_forms_meet() -> None:
    assert stem("invoices") == stem("invoice") == stem("invoiced")
    assert stem("categories") == stem("category")
    assert stem("shipped") == stem("shipping") == stem("ship")
    assert stem("employees") == stem("employee")
    assert stem("status") == "status"
    assert stem("id") == "id"


def test_table_names_count_more_than_columns() -> None:
    tables = schema(
        table("audit_log", "log_id", "invoice_number"),
        table("ar_invoices", "invoice_id", "total_amount"),
        table("hr_employees", "employee_id", "hire_date"),
    )
    assert rank_tables("invoices issued in May", tables) == [
        "ar_invoices",
        "audit_log",
        "hr_employees",
    ]
    assert rank_tables("invoices issued in May", tables, limit=1) == ["ar_invoices"]
    assert rank_tables("invoices issued in May", tables, limit=0) == []


def test_synonyms_and_abbreviations() -> None:
    tables = schema(
        table("pur_suppliers", "supplier_id", "name"),
        table("crm_customers", "customer_id", "name"),
        table("inv_items", "item_id", "name", "qty_on_hand"),
    )
    assert rank_tables("Which vendor is the largest?", tables, limit=1) == ["pur_suppliers"]
    assert rank_tables("List our clients", tables, limit=1) == ["crm_customers"]
    assert rank_tables("products with the least quantity", tables, limit=1) == ["inv_items"]


def test_foreign_key_neighbours_of_strong_hits_come_along() -> None:
    tables = schema(
        table("weather", "weather_id", "temperature"),
        table("orders", "order_id", "order_date", "customer_id", fks={"customer_id": "clients"}),
        table("order_lines", "line_id", "order_id", "quantity", fks={"order_id": "orders"}),
        table("clients", "customer_id", "segment"),
    )
    ranked = rank_tables("total quantity on order lines", tables)
    assert ranked[:2] == ["order_lines", "orders"]
    assert ranked.index("clients") < ranked.index("weather")


def test_ties_keep_schema_order_and_results_repeat() -> None:
    tables = schema(*(table(f"t{i}", f"c{i}") for i in range(5)))
    assert rank_tables("nothing matches here", tables) == ["t0", "t1", "t2", "t3", "t4"]
    assert CatalogueIndex(tables).rank("t3") == rank_tables("t3", tables)


def test_small_schema_catalogue_is_unchanged(demo_engine: sa.Engine) -> None:
    explorer = SchemaExplorer(demo_engine)
    assert compact_catalogue("revenue per region", explorer.tables()) == explorer.catalogue()


def test_threshold_is_inclusive() -> None:
    tables = schema(*(table(f"table_{i:02d}", "id", f"col_{i}") for i in range(40)))
    whole = "\n".join(t.catalogue_line() for t in tables.values())
    assert compact_catalogue("col 7", tables) == whole
    tables["table_40"] = table("table_40", "id", "col_40")
    assert compact_catalogue("col 7", tables) != whole + "\n" + tables["table_40"].catalogue_line()
    assert compact_catalogue("col 7", tables, always_include_all_below=41) == (
        whole + "\n" + tables["table_40"].catalogue_line()
    )


def test_big_schema_shows_best_tables_then_every_other_name(
    erp_tables: dict[str, TableInfo],
) -> None:
    text = compact_catalogue("What was total invoiced revenue per customer in 2025?", erp_tables)
    lines = text.splitlines()
    shown, rest = lines[:-1], lines[-1]
    assert len(shown) == DEFAULT_MAX_TABLES
    assert shown == [
        erp_tables[n].catalogue_line()
        for n in rank_tables(
            "What was total invoiced revenue per customer in 2025?",
            erp_tables,
            limit=DEFAULT_MAX_TABLES,
        )
    ]
    assert {"ar_invoices", "crm_customers"} <= {line.split("(")[0] for line in shown}
    prefix = f"-- {len(erp_tables) - DEFAULT_MAX_TABLES} more tables, columns not shown: "
    assert rest.startswith(prefix)
    named = [name for part in rest[len(prefix) :].split(", ") for name in _expand(part)]
    assert sorted(named + [line.split("(")[0] for line in shown]) == sorted(erp_tables)


def _expand(part: str) -> list[str]:
    """``ap_{invoices,payments}`` -> ``["ap_invoices", "ap_payments"]``."""
    if "{" not in part:
        return [part]
    prefix, tails = part[:-1].split("{")
    return [prefix + tail for tail in tails.split(",")]


def test_gold_tables_are_always_shown_on_the_erp_questions(
    erp_tables: dict[str, TableInfo],
) -> None:
    missing = {}
    for question, gold in ERP_QUESTIONS:
        shown = set(rank_tables(question, erp_tables, limit=DEFAULT_MAX_TABLES))
        if not gold <= shown:
            missing[question] = sorted(gold - shown)
    included = sum(len(gold) for _, gold in ERP_QUESTIONS) - sum(len(m) for m in missing.values())
    recall = included / sum(len(gold) for _, gold in ERP_QUESTIONS)
    assert recall == 1.0, missing


def test_big_schema_catalogue_is_a_fraction_of_the_whole(erp_tables: dict[str, TableInfo]) -> None:
    whole = len("\n".join(t.catalogue_line() for t in erp_tables.values()))
    shares = [len(compact_catalogue(q, erp_tables)) / whole for q, _ in ERP_QUESTIONS]
    assert sum(shares) / len(shares) <= 0.15


def test_same_question_same_text(erp_tables: dict[str, TableInfo]) -> None:
    question = ERP_QUESTIONS[5][0]
    first = compact_catalogue(question, erp_tables)
    assert compact_catalogue(question, dict(erp_tables)) == first
    assert compact_catalogue(question, erp_tables, index=CatalogueIndex(erp_tables)) == first


def test_index_is_built_once_per_schema_mapping(tmp_path: Path) -> None:
    tables = schema(table("a_items", "item_id"), table("b_orders", "order_id"))
    first = index_for(tables)
    assert index_for(tables) is first
    assert index_for(dict(tables)) is not first
    tables["c_lines"] = table("c_lines", "line_id")
    assert index_for(tables) is not first
    assert rank_tables("lines", tables, limit=1) == ["c_lines"]


def test_public_names() -> None:
    assert agents.catalogue.__all__ == sorted(agents.catalogue.__all__)


def test_docstring_examples_run() -> None:
    assert doctest.testmod(agents.catalogue).failed == 0


def test_batch_catalogue_shows_every_questions_best_tables(
    erp_tables: dict[str, TableInfo],
) -> None:
    questions = [q for q, _ in ERP_QUESTIONS[:10]]
    assert batch_catalogue(questions[:1], erp_tables) == compact_catalogue(questions[0], erp_tables)
    lines = batch_catalogue(questions, erp_tables).splitlines()
    shown = [line.split("(")[0] for line in lines[:-1]]
    assert len(shown) == len(set(shown))
    for question, gold in ERP_QUESTIONS[:10]:
        assert set(rank_tables(question, erp_tables, limit=DEFAULT_MAX_TABLES)) <= set(shown)
        assert gold <= set(shown)
    assert lines[-1].startswith(f"-- {len(erp_tables) - len(shown)} more tables")


def test_batch_catalogue_keeps_small_schemas_whole(demo_engine: sa.Engine) -> None:
    explorer = SchemaExplorer(demo_engine)
    assert batch_catalogue(["a", "b"], explorer.tables()) == explorer.catalogue()
