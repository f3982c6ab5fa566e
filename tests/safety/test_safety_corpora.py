"""Real analyst SQL must pass: Spider dev (SQLite), spiderman (MySQL quoting), text2sql-data.

Zero false positives is the target; the only refusals allowed are the documented policy ones:
``SELECT *`` that cannot be expanded, and a LIMIT that is not a number (text2sql-data's template
variable ``limit0``). Where a database is available, the rewritten query returns the same rows as
the original, within the cap.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest
import sqlalchemy as sa
from safety_corpora import (
    load_spider_sqlite,
    spider_dev,
    spider_schemas,
    spiderman_queries,
    text2sql,
)

from safety import SafetyPolicy, SqlValidator, open_readonly_engine

POLICY_CODES = {"select_star", "limit_not_literal"}


@pytest.fixture(autouse=True)
def quiet_sqlglot():
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    yield


def refusals(pairs, validator_for) -> Counter:
    wrong: Counter = Counter()
    for key, sql in pairs:
        result = validator_for(key).validate(sql)
        if not result.ok and result.refusal.code not in POLICY_CODES:
            wrong[(result.refusal.code, sql[:120])] += 1
    return wrong


def test_spider_dev_gold_has_no_false_positives():
    validator = SqlValidator("sqlite")
    wrong = refusals([(None, e["query"]) for e in spider_dev()], lambda _: validator)
    assert not wrong, wrong.most_common(5)


def test_spiderman_mysql_gold_has_no_false_positives():
    validator = SqlValidator("mysql")
    wrong = refusals([(None, r["sql"]) for r in spiderman_queries()], lambda _: validator)
    assert not wrong, wrong.most_common(5)


ATIS_SAMPLE = (
    5  # ATIS statements are long; every 5th keeps this test quick (the benchmark checks all)
)


def test_text2sql_data_has_no_false_positives():
    validator = SqlValidator("mysql")
    atis = [sql for name, sql in text2sql() if name == "atis"][::ATIS_SAMPLE]
    others = [sql for name, sql in text2sql() if name != "atis"]
    wrong = refusals([(None, sql) for sql in others + atis], lambda _: validator)
    assert not wrong, wrong.most_common(5)


def test_spider_with_schema_and_star_expansion_refuses_nothing():
    schemas = spider_schemas()
    validators: dict[str, SqlValidator] = {}

    def validator_for(db_id: str) -> SqlValidator:
        if db_id not in validators:
            validators[db_id] = SqlValidator(
                "sqlite", SafetyPolicy(star="expand"), schema=schemas[db_id]
            )
        return validators[db_id]

    failures = [
        (e["query"], validator_for(e["db_id"]).validate(e["query"]).refusal)
        for e in spider_dev()
        if not validator_for(e["db_id"]).validate(e["query"]).ok
    ]
    assert not failures, failures[:5]


@pytest.mark.parametrize("source", ["spider_dev", "spiderman"])
def test_gold_sql_resolves_against_the_real_schema(source):
    """Resolution switched on (every reference must end at a real column): no gold query refused.

    The default policy (``SELECT *`` expanded) answers the Spider ``SELECT *`` questions too.
    """
    schemas = spider_schemas()
    dialect = "sqlite" if source == "spider_dev" else "mysql"
    pairs = (
        [(e["db_id"], e["query"]) for e in spider_dev()]
        if source == "spider_dev"
        else [(r["database"], r["sql"]) for r in spiderman_queries() if r["database"] in schemas]
    )
    validators: dict[str, SqlValidator] = {}

    def validator_for(db_id: str) -> SqlValidator:
        if db_id not in validators:
            validators[db_id] = SqlValidator(
                dialect, SafetyPolicy(require_resolution=True), schema=schemas[db_id]
            )
        return validators[db_id]

    assert len(pairs) > 1000
    refused = [
        (sql, result.refusal)
        for db_id, sql in pairs
        if not (result := validator_for(db_id).validate(sql)).ok
    ]
    assert not refused, refused[:5]
    stars = [sql for _, sql in pairs if "*" in sql.split("FROM")[0].replace("(*)", "")]
    assert stars and all(validator_for(db).validate(sql).ok for db, sql in pairs if sql in stars)


def test_spider_rewritten_queries_return_the_same_rows(tmp_path):
    """Original vs rewritten (LIMIT 20 enforced, SELECT * expanded) on the Spider databases in SQLite."""
    cap = 20
    schemas = spider_schemas()
    engines: dict[str, sa.Engine | None] = {}
    compared = 0
    for entry in spider_dev():
        db_id = entry["db_id"]
        if db_id not in engines:
            path = load_spider_sqlite(db_id, tmp_path / f"{db_id}.db")
            engines[db_id] = open_readonly_engine(f"sqlite:///{path}") if path else None
        engine = engines[db_id]
        if engine is None:
            continue
        validator = SqlValidator(
            "sqlite",
            SafetyPolicy(star="expand", max_limit=cap, require_resolution=True),
            schema=schemas[db_id],
        )
        result = validator.validate(entry["query"])
        assert result.ok, (entry["query"], result.refusal)
        with engine.connect() as conn:
            try:
                original = [tuple(r) for r in conn.exec_driver_sql(entry["query"]).fetchall()]
            except sa.exc.DBAPIError:
                continue  # the gold query does not run on the CSV-built database; nothing to compare
            rewritten = [tuple(r) for r in conn.exec_driver_sql(result.sql).fetchall()]
        # the rows kept are the cap's; the one extra row says "cut" exactly when it was
        assert len(rewritten[:cap]) == min(len(original), cap), entry["query"]
        assert (len(rewritten) > cap) == (len(original) > cap), entry["query"]
        assert not Counter(rewritten) - Counter(original), (entry["query"], result.sql)
        compared += 1
    for engine in engines.values():
        if engine is not None:
            engine.dispose()
    if not engines or all(e is None for e in engines.values()):
        pytest.skip("Spider databases (spider_dev_databases) are absent")
    assert compared > 900, compared


def test_spider_rewritten_queries_return_the_same_rows_on_postgres():
    """The same check on PostgreSQL: Spider gold transpiled from SQLite, validated in the postgres dialect."""
    import os
    import uuid

    import sqlglot
    from safety_backends import POSTGRES_ENV
    from safety_corpora import load_spider_postgres

    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    cap = 20
    schemas = spider_schemas()
    prefix = f"sg_spider_{uuid.uuid4().hex[:6]}"
    admin = sa.create_engine(url)
    loaded: dict[str, sa.Engine | None] = {}
    compared = 0
    try:
        for entry in spider_dev():
            db_id = entry["db_id"]
            if db_id not in loaded:
                schema = f"{prefix}_{db_id.lower()}"
                raw = admin.raw_connection()
                try:
                    present = load_spider_postgres(raw.driver_connection, db_id, schema)
                    raw.commit()
                finally:
                    raw.close()
                loaded[db_id] = (
                    open_readonly_engine(
                        url,
                        connect_args={"options": f"-c search_path={schema}"},
                        poolclass=sa.pool.QueuePool,
                    )
                    if present
                    else None
                )
            engine = loaded[db_id]
            if engine is None:
                continue
            try:
                original_sql = sqlglot.transpile(entry["query"], read="sqlite", write="postgres")[0]
            except sqlglot.errors.SqlglotError:
                continue
            result = SqlValidator(
                "postgres",
                SafetyPolicy(star="expand", max_limit=cap),
                schema={t.lower(): [c.lower() for c in cs] for t, cs in schemas[db_id].items()},
            ).validate(original_sql)
            with engine.connect() as conn:
                try:
                    original = [
                        tuple(r)
                        for r in conn.exec_driver_sql(original_sql.replace("%", "%%")).fetchall()
                    ]
                except sa.exc.DBAPIError:
                    # SQLite-only semantics (loose GROUP BY, text vs number, a "string" that
                    # PostgreSQL reads as a column): nothing to compare, refused or not
                    continue
            assert result.ok, (original_sql, result.refusal)
            with engine.connect() as conn:
                rewritten = [
                    tuple(r) for r in conn.exec_driver_sql(result.sql.replace("%", "%%")).fetchall()
                ]
            assert len(rewritten[:cap]) == min(len(original), cap), original_sql
            assert (len(rewritten) > cap) == (len(original) > cap), original_sql
            assert not Counter(rewritten) - Counter(original), (original_sql, result.sql)
            compared += 1
    finally:
        for engine in loaded.values():
            if engine is not None:
                engine.dispose()
        with admin.begin() as conn:
            for db_id in loaded:
                conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {prefix}_{db_id.lower()} CASCADE")
        admin.dispose()
    if not loaded:
        pytest.skip("Spider databases (spider_dev_databases) are absent")
    print(f"compared {compared} Spider queries on PostgreSQL")
    assert compared > 500, compared
