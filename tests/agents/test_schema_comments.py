"""Table and column descriptions on every engine (SQLite from its CREATE TABLE text, MySQL/MariaDB
COMMENT, DuckDB and PostgreSQL COMMENT ON) and from a descriptions file, indexed beside names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.descriptions import Descriptions, load_descriptions
from agents.errors import DescriptionsError
from agents.linking import SchemaIndex
from agents.schema_explorer import SchemaExplorer
from agents.sqlite_comments import create_table_comments

#: Per dialect: a table ``loan`` described by the engine's own means.
LOAN_DDL = {
    "sqlite": [
        "CREATE TABLE loan -- money lent to clients\n"
        "(\n"
        "  loan_id INTEGER PRIMARY KEY, -- the loan\n"
        "  amt NUMERIC(10, 2), -- amount lent\n"
        "  dur INTEGER\n"
        ")"
    ],
    "duckdb": [
        "CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, amt NUMERIC(10, 2), dur INTEGER)",
        "COMMENT ON TABLE loan IS 'money lent to clients'",
        "COMMENT ON COLUMN loan.loan_id IS 'the loan'",
        "COMMENT ON COLUMN loan.amt IS 'amount lent'",
    ],
    "postgres": [
        "CREATE TABLE loan (loan_id INTEGER PRIMARY KEY, amt NUMERIC(10, 2), dur INTEGER)",
        "COMMENT ON TABLE loan IS 'money lent to clients'",
        "COMMENT ON COLUMN loan.loan_id IS 'the loan'",
        "COMMENT ON COLUMN loan.amt IS 'amount lent'",
    ],
    "mysql": [
        "CREATE TABLE loan (loan_id INTEGER PRIMARY KEY COMMENT 'the loan', "
        "amt NUMERIC(10, 2) COMMENT 'amount lent', dur INTEGER) COMMENT = 'money lent to clients'"
    ],
}


def _dialect(engine: sa.Engine) -> str:
    return {"postgresql": "postgres", "mariadb": "mysql"}.get(
        engine.dialect.name, engine.dialect.name
    )


def test_comments_are_read_on_every_engine(shop_engine: sa.Engine) -> None:
    with shop_engine.begin() as conn:
        for statement in LOAN_DDL[_dialect(shop_engine)]:
            conn.exec_driver_sql(statement)
    tables = SchemaExplorer(shop_engine).tables()
    loan = tables["loan"]
    assert loan.comment == "money lent to clients"
    assert loan.column("loan_id").comment == "the loan"
    assert loan.column("amt").comment == "amount lent"
    assert loan.column("dur").comment is None
    assert tables["region"].comment is None
    # indexed beside the names: the question names no word of the table's or columns' names
    assert SchemaIndex(tables).rank("How much money was lent to clients?")[0] == "loan"


def test_sqlite_comments_through_a_read_only_engine(tmp_path: Path) -> None:
    from safety import open_readonly_engine

    path = tmp_path / "bank.sqlite"
    writable = sa.create_engine(f"sqlite:///{path}")
    with writable.begin() as conn:
        conn.exec_driver_sql(LOAN_DDL["sqlite"][0])
    writable.dispose()
    engine = open_readonly_engine(f"sqlite:///{path}")
    try:
        loan = SchemaExplorer(engine).tables()["loan"]
    finally:
        engine.dispose()
    assert (loan.comment, loan.column("amt").comment) == ("money lent to clients", "amount lent")


@pytest.mark.parametrize(
    ("sql", "table", "columns"),
    [
        ("CREATE TABLE t (a INT)", None, {}),
        ("CREATE TABLE t ( -- about t\n a INT -- the a\n)", "about t", {"a": "the a"}),
        ("CREATE TABLE t (\n  -- leading\n  -- two lines\n  a INT,\n  b INT\n)", None, {"a": "leading two lines"}),
        ("CREATE TABLE t (a INT, /* same line as a */\n b INT)", None, {"a": "same line as a"}),
        ("CREATE TABLE t (a TEXT DEFAULT '-- not a comment', b INT -- b's\n)", None, {"b": "b's"}),
        ('CREATE TABLE "odd name" ("col 1" INT, -- first\n [col2] INT /* second */)', None,
         {"col 1": "first", "col2": "second"}),
        ("CREATE TABLE t (a INT, -- the a\n PRIMARY KEY (a) -- not a column\n)", None, {"a": "the a"}),
        ("CREATE TABLE t (a REAL -- in CZK\n   NOT NULL, b INT)", None, {"a": "in CZK"}),
        ("CREATE TABLE t (a INT /* unterminated", None, {}),
    ],
)  # fmt: skip
def test_create_table_comments_belong_where_a_reader_would_put_them(
    sql: str, table: str | None, columns: dict[str, str]
) -> None:
    found = create_table_comments(sql)
    assert (found.table, found.columns) == (table, columns)


def test_descriptions_in_sqlgate_yaml(tmp_path: Path) -> None:
    path = tmp_path / "descriptions.yml"
    path.write_text(
        "tables:\n"
        "  Customer:\n"
        "    description: people who buy\n"
        "    columns:\n"
        "      segment: market tier\n"
        "      region_id: {description: where they live}\n"
        "  ghost: not in the database\n"
    )
    found = load_descriptions(path)
    assert found.tables["customer"].columns == {
        "segment": "market tier",
        "region_id": "where they live",
    }
    assert "ghost" in found.tables  # kept, and ignored when applied


def test_descriptions_in_a_dbt_schema_yml(tmp_path: Path, shop_sqlite: sa.Engine) -> None:
    path = tmp_path / "schema.yml"
    path.write_text(
        "version: 2\n"
        "models:\n"
        "  - name: customer\n"
        "    description: people who buy\n"
        "    columns:\n"
        "      - name: segment\n"
        "        description: market tier\n"
        "sources:\n"
        "  - name: raw\n"
        "    tables:\n"
        "      - name: regions\n"
        "        identifier: region\n"
        "        description: sales territories\n"
    )
    tables = SchemaExplorer(shop_sqlite, descriptions=load_descriptions(path)).tables()
    assert tables["customer"].comment == "people who buy"
    assert tables["customer"].column("segment").comment == "market tier"
    assert tables["region"].comment == "sales territories"
    # another explorer without the file has its own cache entry and no descriptions
    assert SchemaExplorer(shop_sqlite).tables()["customer"].comment is None


def test_descriptions_in_a_dbt_manifest(tmp_path: Path) -> None:
    manifest = {
        "nodes": {
            "model.shop.customer": {
                "resource_type": "model",
                "name": "customer",
                "alias": "customer",
                "description": "people who buy",
                "columns": {"segment": {"name": "segment", "description": "market tier"}},
            },
            "test.shop.not_null": {"resource_type": "test", "name": "not_null_x"},
        },
        "sources": {
            "source.shop.raw.region": {
                "name": "region",
                "identifier": "region",
                "description": "sales territories",
                "columns": {},
            }
        },
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    found = load_descriptions(path)
    assert found.tables["customer"].description == "people who buy"
    assert found.tables["customer"].columns == {"segment": "market tier"}
    assert found.tables["region"].description == "sales territories"
    assert set(found.tables) == {"customer", "region"}


def test_a_description_is_added_to_the_database_comment_not_put_in_its_place(
    shop_sqlite: sa.Engine,
) -> None:
    tables = SchemaExplorer(shop_sqlite).tables()
    tables["customer"].comment = "from the catalogue"
    found = Descriptions.from_data({"tables": {"customer": "people who buy"}})
    described = found.apply(tables)
    assert described["customer"].comment == "from the catalogue; people who buy"
    assert tables["customer"].comment == "from the catalogue"  # the input is not changed


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        ("tables: [1, 2]", ".yml", "'tables' must map table names"),
        ("nothing: here", ".yml", "no 'tables'"),
        ("models:\n  - description: x\n", ".yml", "models[0] needs a 'name'"),
        ("tables:\n  t:\n    columns: 3\n", ".yml", "tables.t.columns must be a mapping"),
        ("{not json", ".json", "not valid .json"),
        ("tables: {t: [1]}", ".yaml", "tables.t must be a text or a mapping"),
    ],
)
def test_a_malformed_descriptions_file_is_one_error_naming_the_key(
    tmp_path: Path, text: str, suffix: str, message: str
) -> None:
    path = tmp_path / f"bad{suffix}"
    path.write_text(text)
    with pytest.raises(DescriptionsError) as info:
        load_descriptions(path)
    assert (
        message in info.value.message
        and str(path) in info.value.message
        and info.value.code == "invalid_descriptions"
    )


def test_a_missing_descriptions_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(DescriptionsError, match="cannot read descriptions file"):
        load_descriptions(tmp_path / "nope.yml")
