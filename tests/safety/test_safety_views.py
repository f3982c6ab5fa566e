"""Column and table rules follow views, on every engine, proven on twin databases.

The twins (``safety_twins``) differ only in the protected values; the same views are created on
both. A statement the validator accepts must give the same outcome on both twins; with the
validator off (the raw text run as written) many of the same statements differ, so the check
has teeth.
"""

from __future__ import annotations

import pytest
from safety_twins import ALLOW_POLICY, POLICY, Twins, drop_twins, make_twins

from safety import SafetyPolicy, SqlValidator
from safety.access import NameRules
from safety.catalog import SchemaCatalog
from safety.lineage import LineageRules, ViewLineages

ENGINES = ("sqlite", "duckdb", "postgres", "mysql")

VIEWS = (
    "CREATE VIEW v_contacts AS SELECT id, email AS contact FROM customers",
    "CREATE VIEW v_deep AS SELECT id AS k, upper(contact) AS shout, name AS n FROM "
    "(SELECT c.id, c.contact, s.name FROM v_contacts c JOIN staff s ON s.id = c.id) j",
    "CREATE VIEW v_pay AS SELECT c.id, c.name, s.salary + 0 AS pay FROM customers c "
    "JOIN staff s ON s.id = c.id",
    "CREATE VIEW v_union AS SELECT id, name AS who FROM customers UNION ALL "
    "SELECT id, email FROM customers",
    "CREATE VIEW v_agg AS SELECT name, count(*) AS n, max(salary) AS top FROM staff GROUP BY name",
    "CREATE VIEW v_filter AS SELECT id, name FROM customers WHERE email < 'b'",
    "CREATE VIEW v_safe AS SELECT id, name FROM customers",
    "CREATE VIEW v_safe2 AS SELECT s.id, s.name AS label FROM v_safe s JOIN staff t ON t.id = s.id",
)
COLUMNS = {
    "v_contacts": ("id", "contact"),
    "v_deep": ("k", "shout", "n"),
    "v_pay": ("id", "name", "pay"),
    "v_union": ("id", "who"),
    "v_agg": ("name", "n", "top"),
    "v_filter": ("id", "name"),
    "v_safe": ("id", "name"),
    "v_safe2": ("id", "label"),
}
# Where a view column may stand: every clause that can carry its value out.
POSITIONS = (
    "SELECT {c} FROM {v} ORDER BY 1",
    "SELECT count(*) FROM {v} WHERE {c} < 'b'",
    "SELECT count(*) FROM {v} WHERE {c} > 1000",
    "SELECT max({c}) FROM {v}",
    "SELECT count(DISTINCT {c}) FROM {v}",
    "SELECT {c} IS NULL FROM {v} ORDER BY {c}",
    "SELECT count(*) FROM {v} GROUP BY {c} ORDER BY 1",
    "SELECT x.q FROM (SELECT {c} AS q FROM {v}) x ORDER BY 1",
    "WITH w AS (SELECT {c} AS q FROM {v}) SELECT count(*) FROM w WHERE q < 'b'",
    "SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM {v} WHERE {c} < 'b') ORDER BY id",
    "SELECT count(*) FROM {v}",
    "SELECT name FROM staff UNION ALL SELECT {c} FROM {v} ORDER BY 1",
)


def statements() -> list[str]:
    found = []
    for view, columns in COLUMNS.items():
        for column in columns:
            for position in POSITIONS:
                found.append(position.format(c=column, v=view))
    return found


def extra(dialect: str) -> tuple[str, ...]:
    views = VIEWS
    if dialect == "postgres":
        views += (
            "CREATE MATERIALIZED VIEW mv_contacts AS SELECT id, lower(email) AS contact "
            "FROM customers",
        )
    return views


def same(outcome: tuple, twins: Twins, twin: str) -> str:
    name = (twins.a if twin == "a" else twins.b).default_schema
    return repr(outcome).replace(name, "<database>")


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    made: dict[str, Twins] = {}

    def get(dialect: str) -> Twins:
        if dialect not in made:
            made[dialect] = make_twins(
                dialect, tmp_path_factory.mktemp(f"views_{dialect}"), extra(dialect)
            )
        return made[dialect]

    yield get
    for pair in made.values():
        drop_twins(pair)


def corpus(dialect: str) -> list[str]:
    found = statements()
    if dialect == "postgres":
        found += [p.format(c=c, v="mv_contacts") for c in ("id", "contact") for p in POSITIONS]
    return found


@pytest.mark.parametrize("dialect", ENGINES)
class TestViewsOnTwins:
    def test_views_are_read_with_their_definitions(self, twins, dialect):
        a = twins(dialect).a
        names = {k.split(".")[-1] for k in a.views}
        assert set(COLUMNS) <= names
        assert all(a.views[k] for k in a.views), a.views

    @pytest.mark.parametrize("policy", [POLICY, ALLOW_POLICY], ids=["deny-list", "allow-list"])
    def test_no_accepted_statement_reads_a_protected_value(self, twins, dialect, policy):
        pair = twins(dialect)
        va, vb = pair.a.validator(policy), pair.b.validator(policy)
        harmful, accepted = [], []
        for sql in corpus(dialect):
            ra, rb = va.validate(sql), vb.validate(sql)
            if ra.ok != rb.ok:
                harmful.append(("verdicts differ between twins", sql))
            if not ra.ok:
                continue
            accepted.append(sql)
            if same(pair.a.outcome(ra.sql), pair, "a") != same(
                pair.b.outcome(rb.sql or ""), pair, "b"
            ):
                harmful.append((sql, ra.sql))
        assert not harmful, harmful[:10]
        # the safe views stay readable: rules follow lineage, they do not refuse every view
        assert any("v_safe2" in s and "label" in s for s in accepted), accepted[:20]
        assert any("v_deep" in s and "{c}" not in s and " k " in f" {s} " for s in accepted)
        assert any("v_agg" in s and "top" not in s for s in accepted)

    def test_without_the_validator_the_statements_leak(self, twins, dialect):
        """The control: run as written, many of the same statements differ between the twins."""
        pair = twins(dialect)
        leaks = [
            sql
            for sql in corpus(dialect)
            if same(pair.a.outcome(sql), pair, "a") != same(pair.b.outcome(sql), pair, "b")
        ]
        assert len(leaks) >= 30, (len(leaks), leaks[:5])
        for view in ("v_contacts", "v_deep", "v_pay", "v_union", "v_agg", "v_filter"):
            assert any(view in sql for sql in leaks), view

    def test_refusals_name_the_view_column(self, twins, dialect):
        validator = twins(dialect).a.validator(POLICY)
        result = validator.validate("SELECT contact FROM v_contacts")
        assert result.refusal is not None and result.refusal.code == "column_denied"
        assert "v_contacts.contact" in result.refusal.message
        filtered = validator.validate("SELECT count(*) FROM v_filter")
        assert filtered.refusal is not None
        assert filtered.refusal.code == "view_reads_protected"
        assert "email" in filtered.refusal.message


class TestLineageRules:
    CATALOG = {"customers": ["id", "email"], "v": ["id", "contact"], "w": ["a"], "o": ["x"]}

    def validator(self, policy: SafetyPolicy, views: dict[str, str | None]) -> SqlValidator:
        return SqlValidator("sqlite", policy, schema=self.CATALOG, views=views)

    def test_an_unreadable_view_must_be_named(self):
        views = {"main.v": "SELECT id, email AS contact FROM customers", "main.o": None}
        deny = self.validator(SafetyPolicy(denied_columns=("customers.email",)), views)
        assert deny.validate("SELECT x FROM o").refusal.code == "view_unreadable"
        named = self.validator(
            SafetyPolicy(denied_columns=("customers.email",), allowed_tables=("o", "v")), views
        )
        assert named.validate("SELECT x FROM o").ok
        assert not named.validate("SELECT contact FROM v").ok

    def test_a_view_over_an_unreadable_view_is_unreadable(self):
        views = {"main.o": None, "main.w": "SELECT x AS a FROM o"}
        deny = self.validator(SafetyPolicy(denied_columns=("customers.email",)), views)
        assert deny.validate("SELECT a FROM w").refusal.code == "view_unreadable"

    def test_a_definition_that_does_not_parse_is_opaque(self):
        views = {"main.w": "CREATE VIEW w AS SELEC nonsense"}
        deny = self.validator(SafetyPolicy(denied_columns=("customers.email",)), views)
        assert deny.validate("SELECT a FROM w").refusal.code == "view_unreadable"

    def test_a_view_defined_in_terms_of_itself_is_opaque(self):
        catalog = SchemaCatalog({"w": ["a"]}, "sqlite")
        lineages = ViewLineages({"main.w": "SELECT a FROM w"}, catalog)
        assert lineages.of("main", "w").opaque

    def test_table_rules_follow_views(self):
        views = {"main.v": "SELECT id, email AS contact FROM customers"}
        denied = self.validator(SafetyPolicy(denied_tables=("customers",)), views)
        assert denied.validate("SELECT id FROM v").refusal.code == "table_denied"
        allowed = self.validator(SafetyPolicy(allowed_tables=("customers",)), views)
        assert allowed.validate("SELECT id FROM v").ok
        only_view = self.validator(SafetyPolicy(allowed_tables=("v",)), views)
        assert only_view.validate("SELECT id FROM v").ok
        assert not only_view.validate("SELECT id FROM customers").ok

    def test_a_deny_entry_wins_over_naming_the_view(self):
        views = {"main.v": "SELECT id, email AS contact FROM customers"}
        rules = LineageRules.wrap(
            NameRules.from_policy(
                allowed_columns=("v.contact", "v.id"), denied_columns=("customers.email",)
            ),
            ViewLineages(views, SchemaCatalog(self.CATALOG, "sqlite")),
        )
        assert rules.column_verdict("main", "v", "contact", "main") == "column_denied"
        assert rules.column_verdict("main", "v", "id", "main") is None

    def test_star_over_a_view_leaves_derived_columns_out(self):
        views = {"main.v": "SELECT id, email AS contact FROM customers"}
        deny = self.validator(SafetyPolicy(denied_columns=("customers.email",)), views)
        assert deny.validate("SELECT * FROM v").sql == "SELECT id FROM v LIMIT 1001"
