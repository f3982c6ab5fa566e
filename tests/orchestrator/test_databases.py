"""The same question against SQLite and the local PostgreSQL (and MariaDB, DuckDB): same answer rows."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from approvals import ApproveAll
from orchestrator.core.result import RunStatus
from tests.orchestrator.conftest import Harness
from tests.scripted_llm import scenarios as sc

SCHEMA = "sqlgate_demo"


def copy_demo(demo_db: Path, target: sa.Engine, schema: str | None) -> None:
    """Copy the demo database's tables and rows into ``target`` (fresh each time)."""
    source = sa.create_engine(f"sqlite:///{demo_db}")
    meta = sa.MetaData()
    meta.reflect(source)
    with target.begin() as conn:
        if schema:
            conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
        else:
            for table in reversed(meta.sorted_tables):
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {table.name}"))
    copied = sa.MetaData(schema=schema)
    for table in meta.sorted_tables:
        for column in table.columns:
            column.server_default = None  # SQLite's defaults (0 for false) are not portable
            column.autoincrement = False  # ids are copied as they are
        table.to_metadata(copied, schema=schema)
    copied.create_all(target)
    with source.connect() as src, target.begin() as dst:
        for table in meta.sorted_tables:
            rows = [dict(r._mapping) for r in src.execute(table.select())]
            insert = copied.tables[f"{schema}.{table.name}" if schema else table.name].insert()
            if any(fk.column.table is table for fk in table.foreign_keys):
                for row in rows:  # self-references: managers first, one row at a time
                    dst.execute(insert, [row])
            elif rows:
                dst.execute(insert, rows)
    source.dispose()


@pytest.fixture(scope="module")
def postgres_demo_url(postgres_url: str, demo_db: Path) -> str:
    engine = sa.create_engine(postgres_url)
    copy_demo(demo_db, engine, SCHEMA)
    engine.dispose()
    return (
        sa.make_url(postgres_url)
        .update_query_dict({"options": f"-csearch_path={SCHEMA}"})
        .render_as_string(hide_password=False)
    )


@pytest.fixture(scope="module")
def mysql_demo_url(mysql_url: str, demo_db: Path) -> str:
    server = sa.create_engine(mysql_url)
    with server.begin() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {SCHEMA}"))
        conn.execute(sa.text(f"CREATE DATABASE {SCHEMA}"))
    server.dispose()
    url = sa.make_url(mysql_url).set(database=SCHEMA)
    engine = sa.create_engine(url)
    copy_demo(demo_db, engine, None)
    engine.dispose()
    return url.render_as_string(hide_password=False)


@pytest.fixture(scope="module")
def duckdb_demo_url(demo_db: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("duck") / "demo.duckdb"
    engine = sa.create_engine(f"duckdb:///{path}")
    copy_demo(demo_db, engine, None)
    engine.dispose()
    return f"duckdb:///{path}"


@pytest.mark.vcr
def test_same_question_on_mysql_and_duckdb(
    harness: Harness, demo_url: str, mysql_demo_url: str, duckdb_demo_url: str, vcr
) -> None:
    reference = harness.pipeline(demo_url, ApproveAll()).ask(sc.PRODUCT_COUNT)
    for url, dialect in ((mysql_demo_url, "mysql"), (duckdb_demo_url, "duckdb")):
        result = harness.pipeline(url, ApproveAll()).ask(sc.PRODUCT_COUNT)
        assert result.status == RunStatus.ANSWERED, (dialect, result.error)
        assert result.dialect == dialect
        assert result.rows_preview == reference.rows_preview
        assert result.llm_calls == 3


@pytest.mark.vcr
def test_same_question_on_sqlite_and_postgres(
    harness: Harness, demo_url: str, postgres_demo_url: str, vcr
) -> None:
    on_sqlite = harness.pipeline(demo_url, ApproveAll()).ask(sc.PRODUCT_COUNT)
    on_postgres = harness.pipeline(postgres_demo_url, ApproveAll()).ask(sc.PRODUCT_COUNT)

    assert on_sqlite.status == on_postgres.status == RunStatus.ANSWERED, (
        on_sqlite.error,
        on_postgres.error,
    )
    assert (on_sqlite.dialect, on_postgres.dialect) == ("sqlite", "postgres")
    assert on_sqlite.rows_preview == on_postgres.rows_preview
    assert on_sqlite.answer == on_postgres.answer
    assert on_sqlite.llm_calls == on_postgres.llm_calls == 3


def test_the_factory_on_every_engine_binds_dialect_schema_and_warns_about_privileges(
    demo_url: str, postgres_demo_url: str, mysql_demo_url: str, duckdb_demo_url: str
) -> None:
    """One factory per URL: the dialect is the URL's, references resolve in the engine's default
    schema, a denied column stays out of an expanded star, and excess rights are named."""
    from orchestrator.core.database import TargetDatabase
    from safety import Policy

    policy = Policy.from_data({"columns": {"deny": ["products.cost"]}})
    expected = {
        demo_url: ("sqlite", "main"),
        postgres_demo_url: ("postgres", SCHEMA),
        mysql_demo_url: ("mysql", SCHEMA),
        duckdb_demo_url: ("duckdb", "main"),
    }
    for url, (dialect, default_schema) in expected.items():
        database = TargetDatabase(url, policy=policy)
        try:
            validator = database.validator()
            assert (database.dialect, validator.default_schema) == (dialect, default_schema)
            result = validator.validate("SELECT * FROM products")
            assert result.ok and "cost" not in (result.sql or ""), (dialect, result.refusal)
            refused = validator.validate("SELECT cost FROM products")
            assert refused.refusal is not None and refused.refusal.code == "column_denied"
            rows = database.executor().run(result).rows
            assert len(rows) == 120 and len(rows[0]) == 6  # every product, without its cost
        finally:
            database.dispose()
    # The test servers connect as root: sqlgate names what such a role may do beyond reading.
    mysql = TargetDatabase(mysql_demo_url)
    try:
        assert any("FILE" in w for w in mysql.privilege_warnings), mysql.privilege_warnings
    finally:
        mysql.dispose()
