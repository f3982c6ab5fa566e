"""Real databases for the deterministic agents: the demo SQLite file, and a small shop schema
loaded into SQLite, DuckDB and (when SQLGATE_TEST_POSTGRES_URL / SQLGATE_TEST_MYSQL_URL are
set) PostgreSQL and MySQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.schema_explorer import clear_schema_cache
from orchestrator.features.demo.database import build_demo_database

SHOP_DDL = (
    "CREATE TABLE region (region_id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL)",
    "CREATE TABLE customer (customer_id INTEGER PRIMARY KEY, name VARCHAR(60) NOT NULL,"
    " region_id INTEGER REFERENCES region (region_id), segment VARCHAR(20))",
    "CREATE TABLE purchase (purchase_id INTEGER PRIMARY KEY,"
    " customer_id INTEGER NOT NULL REFERENCES customer (customer_id),"
    " amount NUMERIC(10, 2), note VARCHAR(100), created DATE)",
    "CREATE TABLE purchase_line (purchase_id INTEGER NOT NULL REFERENCES purchase (purchase_id),"
    " line_no INTEGER NOT NULL, qty INTEGER, PRIMARY KEY (purchase_id, line_no))",
    "CREATE TABLE audit_log (id INTEGER PRIMARY KEY, message VARCHAR(200))",
    "CREATE VIEW big_purchase AS SELECT purchase_id, amount FROM purchase WHERE amount > 50",
    "INSERT INTO region VALUES (1, 'North'), (2, 'South'), (3, 'West')",
    "INSERT INTO customer VALUES (1, 'Ada', 1, 'Consumer'), (2, 'Grace', 2, 'Enterprise'),"
    " (3, 'Linus', 2, NULL), (4, 'Barbara', 3, 'Consumer')",
    "INSERT INTO purchase VALUES (1, 1, 12.50, 'first: 100% paid', '2025-01-31'),"
    " (2, 1, 99.99, NULL, '2025-02-01'), (3, 2, 5.00, NULL, '2025-02-02'), (4, 4, 42.00, NULL, '2025-03-15')",
    "INSERT INTO purchase_line VALUES (1, 1, 2), (1, 2, 1), (2, 1, 5), (3, 1, 1)",
)


def _run_ddl(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for statement in SHOP_DDL:
            # no_parameters: the driver must not read '%' in literals as a placeholder
            conn.execution_options(no_parameters=True).exec_driver_sql(statement)


@pytest.fixture(autouse=True)
def _fresh_schema_cache() -> Iterator[None]:
    clear_schema_cache()
    yield
    clear_schema_cache()


@pytest.fixture(scope="session")
def demo_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_database(tmp_path_factory.mktemp("demo") / "demo.sqlite")


@pytest.fixture
def demo_engine(demo_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{demo_path}")
    yield engine
    engine.dispose()


@pytest.fixture
def shop_sqlite(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.sqlite'}")
    _run_ddl(engine)
    yield engine
    engine.dispose()


def _postgres(tmp_path: Path) -> Iterator[sa.Engine]:
    url = os.environ.get("SQLGATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip(
            "SQLGATE_TEST_POSTGRES_URL is not set (e.g. postgresql+psycopg://root@127.0.0.1:5432/test)"
        )
    schema = f"sqlgate_agents_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    engine = sa.create_engine(url, connect_args={"options": f"-csearch_path={schema}"})
    try:
        _run_ddl(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


def _mysql(tmp_path: Path) -> Iterator[sa.Engine]:
    url = os.environ.get("SQLGATE_TEST_MYSQL_URL")
    if not url:
        pytest.skip(
            "SQLGATE_TEST_MYSQL_URL is not set (e.g. mysql+pymysql://root@127.0.0.1:3306/test)"
        )
    database = f"sqlgate_agents_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE `{database}`")
    engine = sa.create_engine(sa.make_url(url).set(database=database))
    try:
        _run_ddl(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE `{database}`")
        admin.dispose()


def _duckdb(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"duckdb:///{tmp_path / 'shop.duckdb'}")
    _run_ddl(engine)
    yield engine
    engine.dispose()


def _sqlite(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.sqlite'}")
    _run_ddl(engine)
    yield engine
    engine.dispose()


_BACKENDS = {"sqlite": _sqlite, "duckdb": _duckdb, "postgres": _postgres, "mysql": _mysql}


@pytest.fixture(params=sorted(_BACKENDS))
def shop_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sa.Engine]:
    """The shop schema on every backend available here."""
    yield from _BACKENDS[request.param](tmp_path)


@pytest.fixture
def postgres_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    yield from _postgres(tmp_path)


@pytest.fixture
def mysql_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    yield from _mysql(tmp_path)
