"""Row filters, proven on twin databases that differ only in the rows outside the filter.

``orders(id, region, total)`` and ``teams(id, label)``: the EU rows of ``orders`` are the same on
both twins, the others differ (in number and values). Asked as someone whose region is EU, every
statement the validator accepts answers alike on both twins; run as written, many differ.
"""

from __future__ import annotations

import itertools

import pytest
from safety_twins import Twins, drop_twins, make_twins

from safety import SafetyPolicy, SqlValidator

ENGINES = ("sqlite", "duckdb", "postgres", "mysql")
FILTERS = (("orders", "region = {user.region}"),)
DENY = SafetyPolicy(row_filters=FILTERS, denied_columns=("teams.secret",))
ALLOW = SafetyPolicy(
    row_filters=FILTERS,
    allowed_columns=("orders.id", "orders.region", "orders.total", "teams.id", "teams.label"),
)
EU = {"region": "EU"}
ROWS = {
    "a": [(1, "EU", 10), (2, "EU", 20), (3, "US", 500), (4, "APAC", 7)],
    "b": [(1, "EU", 10), (2, "EU", 20), (5, "US", 1), (6, "US", 2), (7, "LATAM", 99999)],
}


def fill(execute, dialect: str, twin: str) -> None:
    execute("CREATE TABLE orders (id INTEGER, region VARCHAR(10), total INTEGER)")
    execute("CREATE TABLE teams (id INTEGER, label VARCHAR(10), secret VARCHAR(10))")
    for row in ROWS[twin]:
        execute(f"INSERT INTO orders VALUES ({row[0]}, '{row[1]}', {row[2]})")
    for i in range(1, 8):
        execute(f"INSERT INTO teams VALUES ({i}, 'team{i}', 's{i}')")
    execute("CREATE VIEW v_orders AS SELECT id, total FROM orders")


QUERIES = (
    "SELECT id, total FROM orders ORDER BY id",
    "SELECT count(*) FROM orders",
    "SELECT sum(total), max(id) FROM orders",
    "SELECT region, count(*) FROM orders GROUP BY region ORDER BY region",
    "SELECT id FROM orders WHERE region <> 'EU' ORDER BY id",
    "SELECT o.id FROM orders AS o WHERE o.total > 5 ORDER BY o.id",
    "SELECT t.label FROM teams AS t LEFT JOIN orders AS o ON o.id = t.id WHERE o.id IS NULL ORDER BY 1",
    "SELECT t.label FROM teams AS t WHERE NOT EXISTS (SELECT 1 FROM orders AS o WHERE o.id = t.id) ORDER BY 1",
    "SELECT t.id FROM teams AS t WHERE t.id IN (SELECT id FROM orders) ORDER BY 1",
    "SELECT (SELECT count(*) FROM orders) AS n",
    "WITH x AS (SELECT id, total FROM orders) SELECT count(*), sum(total) FROM x",
    "WITH orders AS (SELECT id FROM teams) SELECT count(*) FROM orders",
    "SELECT id FROM orders UNION SELECT id FROM teams ORDER BY 1",
    "SELECT id FROM teams EXCEPT SELECT id FROM orders ORDER BY 1",
    "SELECT a.id, b.id FROM orders AS a JOIN orders AS b ON a.id < b.id ORDER BY 1, 2",
    "SELECT count(*) FROM teams CROSS JOIN orders",
    "SELECT count(*) FROM {schema}.orders",
    "SELECT count(*) FROM ORDERS",
    "SELECT * FROM orders ORDER BY id",
    "SELECT id FROM v_orders ORDER BY id",
    "SELECT max(total) OVER () AS m FROM teams ORDER BY 1 LIMIT 1",
)


def statements(schema: str) -> list[str]:
    return [q.replace("{schema}", schema) for q in QUERIES]


def same(outcome: tuple, twins: Twins, twin: str) -> str:
    name = (twins.a if twin == "a" else twins.b).default_schema
    return repr(outcome).replace(name, "<database>")


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    made: dict[str, Twins] = {}

    def get(dialect: str) -> Twins:
        if dialect not in made:
            made[dialect] = make_twins(
                dialect,
                tmp_path_factory.mktemp(f"rows_{dialect}"),
                fill=fill,
                keep=("orders", "teams", "v_orders"),
            )
        return made[dialect]

    yield get
    for pair in made.values():
        drop_twins(pair)


def validators(pair: Twins, policy: SafetyPolicy, identity) -> tuple[SqlValidator, SqlValidator]:
    return tuple(  # type: ignore[return-value]
        SqlValidator(
            pair.dialect,
            policy,
            schema=t.schema,
            default_schema=t.default_schema,
            views=t.views,
            identity=identity,
        )
        for t in (pair.a, pair.b)
    )


@pytest.mark.parametrize("dialect", ENGINES)
class TestRowFiltersOnTwins:
    @pytest.mark.parametrize("policy", [DENY, ALLOW], ids=["deny-list", "allow-list"])
    def test_no_accepted_statement_reads_a_row_outside_the_filter(self, twins, dialect, policy):
        pair = twins(dialect)
        va, vb = validators(pair, policy, EU)
        harmful, accepted = [], []
        for sql in statements(pair.a.default_schema):
            other = sql.replace(pair.a.default_schema, pair.b.default_schema)
            ra, rb = va.validate(sql), vb.validate(other)
            if ra.ok != rb.ok:
                harmful.append(("verdicts differ", sql))
            if not ra.ok:
                continue
            accepted.append(sql)
            assert va.validate(ra.sql or "").sql == ra.sql  # the approved text renders to itself
            if same(pair.a.outcome(ra.sql or ""), pair, "a") != same(
                pair.b.outcome(rb.sql or ""), pair, "b"
            ):
                harmful.append((sql, ra.sql))
        assert not harmful, harmful[:5]
        assert len(accepted) >= len(QUERIES) - 2, accepted
        assert "SELECT id FROM v_orders ORDER BY id" not in accepted  # a view over a filtered table

    def test_the_filter_keeps_the_askers_rows(self, twins, dialect):
        pair = twins(dialect)
        va, _ = validators(pair, DENY, EU)
        kind, rows = pair.a.outcome(
            va.validate("SELECT id, total FROM orders ORDER BY id").sql or ""
        )
        assert [tuple(r) for r in rows] == [(1, 10), (2, 20)]

    def test_without_the_validator_the_statements_differ(self, twins, dialect):
        pair = twins(dialect)
        leaks = [
            sql
            for sql in statements(pair.a.default_schema)
            if same(pair.a.outcome(sql), pair, "a")
            != same(
                pair.b.outcome(sql.replace(pair.a.default_schema, pair.b.default_schema)), pair, "b"
            )
        ]
        assert len(leaks) >= 12, (len(leaks), leaks)

    def test_a_missing_attribute_refuses_the_table(self, twins, dialect):
        pair = twins(dialect)
        va, _ = validators(pair, DENY, {"team": "x"})
        assert va.validate("SELECT count(*) FROM orders").refusal.code == "row_filter_unbound"
        assert va.validate("SELECT count(*) FROM teams").ok

    def test_values_are_bound_not_spliced(self, twins, dialect):
        pair = twins(dialect)
        hostile = {"region": "EU' OR '1'='1"}
        va, _ = validators(pair, DENY, hostile)
        kind, rows = pair.a.outcome(va.validate("SELECT count(*) FROM orders").sql or "")
        assert kind == "rows" and [tuple(r) for r in rows] == [(0,)]


def test_a_typed_value_stays_a_number():
    policy = SafetyPolicy(row_filters=(("orders", "total <= {user.limit}"),))
    validator = SqlValidator(
        "postgres", policy, schema={"orders": ["id", "total"]}, identity={"limit": 100}
    )
    assert "WHERE total <= 100)" in (validator.validate("SELECT id FROM orders").sql or "")


def test_a_predicate_must_name_the_tables_own_columns():
    for predicate in ("nosuch = {user.region}", "o.region = 1", "id IN (SELECT 1)"):
        with pytest.raises(ValueError):
            SqlValidator(
                "sqlite",
                SafetyPolicy(row_filters=(("orders", predicate),)),
                schema={"orders": ["id", "region"]},
                identity={"region": "EU"},
            )


def test_queries_cover_every_clause():
    clauses = ("JOIN", "EXISTS", " IN (", "WITH", "UNION", "EXCEPT", "GROUP BY", "OVER")
    assert all(any(c in q for q in QUERIES) for c in clauses)
    assert len(set(itertools.chain(QUERIES))) == len(QUERIES)
