import doctest
import hashlib
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

import tests.fixtures.erp_db
from agents.schema_explorer import SchemaExplorer, clear_schema_cache
from tests.fixtures.erp_db import ERP_MODULES, ERP_QUESTIONS, build_erp_database, erp_tables


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def erp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_erp_database(tmp_path_factory.mktemp("erp") / "erp.sqlite")


@pytest.fixture
def con(erp: Path):
    connection = sqlite3.connect(f"file:{erp}?mode=ro", uri=True)
    yield connection
    connection.close()


def test_same_seed_gives_byte_identical_file(erp: Path, tmp_path: Path) -> None:
    assert sha256(build_erp_database(tmp_path / "again.sqlite", seed=11)) == sha256(erp)
    assert sha256(build_erp_database(tmp_path / "other.sqlite", seed=12)) != sha256(erp)


def test_three_hundred_tables_with_module_prefixes(con: sqlite3.Connection) -> None:
    names = [row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert len(names) == len(set(names)) == 300
    assert {name.split("_")[0] for name in names} == set(ERP_MODULES)
    for expected in (
        "ar_invoices",
        "hr_employees",
        "inv_stock_moves",
        "ref_currencies",
        "ref_countries",
        "ref_units_of_measure",
        "ref_payment_terms",
        "ref_status_codes",
        "gl_journal_lines",
    ):
        assert expected in names


def test_every_table_has_rows_and_foreign_keys_hold(con: sqlite3.Connection) -> None:
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        assert con.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0] >= 4, name
    assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    assert con.execute(
        "SELECT currency_code FROM ref_currencies ORDER BY currency_id"
    ).fetchone() == ("USD",)


def test_schema_explorer_reads_keys_and_foreign_keys(erp: Path) -> None:
    clear_schema_cache()
    engine = sa.create_engine(f"sqlite:///{erp}")
    try:
        tables = SchemaExplorer(engine, cache_key="erp-test").tables()
    finally:
        engine.dispose()
        clear_schema_cache()
    assert len(tables) == 300
    invoices = tables["ar_invoices"]
    assert invoices.primary_key == ["invoice_id"]
    assert {fk.referred_table for fk in invoices.foreign_keys} >= {
        "crm_customers",
        "ref_currencies",
    }
    fk_count = sum(len(t.foreign_keys) for t in tables.values())
    assert fk_count > 500
    linked = {t.name for t in tables.values() if t.foreign_keys} | {
        fk.referred_table for t in tables.values() for fk in t.foreign_keys
    }
    assert len(set(tables) - linked) <= 5  # settings-like tables stand alone, as in real suites


def test_fewer_tables_drop_references_to_missing_ones(tmp_path: Path) -> None:
    path = build_erp_database(tmp_path / "small.sqlite", tables=40)
    con = sqlite3.connect(path)
    try:
        assert (
            con.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            == 40
        )
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        con.close()
    with pytest.raises(ValueError):
        build_erp_database(tmp_path / "none.sqlite", tables=0)


def test_failed_build_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        build_erp_database(tmp_path / "x.sqlite", tables=301)
    assert list(tmp_path.iterdir()) == []


def test_questions_name_real_tables() -> None:
    names = {t.name for t in erp_tables()}
    assert len(ERP_QUESTIONS) >= 40
    assert len({q for q, _ in ERP_QUESTIONS}) == len(ERP_QUESTIONS)
    for question, gold in ERP_QUESTIONS:
        assert gold and gold <= names, question


def test_docstring_examples_run() -> None:
    assert doctest.testmod(tests.fixtures.erp_db).failed == 0
