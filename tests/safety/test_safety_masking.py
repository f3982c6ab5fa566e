"""Masked columns, proven on twin databases that differ only in what the masks hide.

``people(id, name, email, phone, salary)``: the twins have the same ids and names, e-mails with
the same first character and domain, phones with the same last four characters (or both four or
shorter), and unrelated salaries; ``email``, ``phone`` and ``salary`` are masked (``email``,
``last4``, ``null``). Every statement the validator accepts must answer alike on both twins; run
as written (the validator off), many of the same statements differ.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safety_twins import Twins, drop_twins, make_twins

from safety import Policy, SafetyPolicy, SqlValidator

ENGINES = ("sqlite", "duckdb", "postgres", "mysql")
MASKS = (("people.email", "email"), ("people.phone", "last4"), ("people.salary", "null"))
COLUMNS = ("id", "name", "email", "phone", "salary")
DENY = SafetyPolicy(masked_columns=MASKS, denied_columns=("people.secret",))
ALLOW = SafetyPolicy(
    masked_columns=MASKS,
    allowed_columns=("people.id", "people.name", "people.email", "people.phone", "people.salary"),
)
ROWS = {
    "a": [
        (1, "p1", "john@example.org", "555-0101-1234", 51000, "s1"),
        (2, "p2", "jane@corp.example", "999-4321", 62000, "s2"),
        (3, "p3", None, "12", 7, "s3"),
        (4, "p4", "nobody", "", None, "s4"),
    ],
    "b": [
        (1, "p1", "jxyz@example.org", "111-2222-1234", 7, "t1"),
        (2, "p2", "jqq@corp.example", "000-4321", -3, "t2"),
        (3, "p3", None, "99", 100000, "t3"),
        (4, "p4", "zzz", "9", None, "t4"),
    ],
}


def fill(execute, dialect: str, twin: str) -> None:
    execute(
        "CREATE TABLE people (id INTEGER, name VARCHAR(20), email VARCHAR(40), "
        "phone VARCHAR(20), salary INTEGER, secret VARCHAR(10))"
    )
    execute("CREATE TABLE teams (id INTEGER, label VARCHAR(20))")
    for row in ROWS[twin]:
        values = ", ".join("NULL" if v is None else repr(v) for v in row)
        execute(f"INSERT INTO people VALUES ({values})")
    for i in (1, 2, 3):
        execute(f"INSERT INTO teams VALUES ({i}, 'team{i}')")


# Where a column may stand; {c} is a column of people, aliased p.
POSITIONS = (
    "SELECT {c} FROM people ORDER BY id",
    "SELECT p.{c} AS v FROM people AS p ORDER BY p.id",
    "SELECT id FROM people WHERE {c} IS NULL ORDER BY id",
    "SELECT id FROM people WHERE {c} LIKE 'j%' ORDER BY id",
    "SELECT id FROM people WHERE {c} > '5' ORDER BY id",
    "SELECT id FROM people ORDER BY {c}, id",
    "SELECT count(*) FROM people GROUP BY {c} ORDER BY 1",
    "SELECT max({c}) FROM people",
    "SELECT count(DISTINCT {c}) FROM people",
    "SELECT count({c}) FROM people",
    "SELECT length({c}) FROM people ORDER BY id",
    "SELECT upper({c}) FROM people ORDER BY id",
    "SELECT x.v FROM (SELECT id, {c} AS v FROM people) AS x ORDER BY x.id",
    "WITH w AS (SELECT id, {c} AS v FROM people) SELECT v FROM w ORDER BY id",
    "SELECT t.label FROM teams AS t JOIN people AS p ON p.{c} = t.label ORDER BY 1",
    "SELECT id FROM people WHERE id IN (SELECT id FROM people WHERE {c} < 'k') ORDER BY id",
    "SELECT (SELECT max({c}) FROM people) AS m",
    "SELECT {c} FROM people UNION SELECT label FROM teams ORDER BY 1",
    "SELECT id, row_number() OVER (ORDER BY {c}, id) AS r FROM people ORDER BY id",
    "SELECT CASE WHEN {c} IS NULL THEN 0 ELSE 1 END AS k FROM people ORDER BY id",
    "SELECT DISTINCT {c} FROM people ORDER BY 1",
    "SELECT id FROM people WHERE EXISTS (SELECT 1 FROM teams WHERE teams.label < people.{c}) ORDER BY id",
)
HOSTILE = (
    "SELECT * FROM people ORDER BY id",
    "SELECT p.* FROM people AS p ORDER BY 1",
    "SELECT id FROM people JOIN teams USING (id) ORDER BY id",
    "SELECT email FROM people ORDER BY 1",
    "SELECT email AS id FROM people ORDER BY id",
    "SELECT id FROM people ORDER BY 1 LIMIT 1",
    "SELECT id, email FROM people ORDER BY 2, 1",
    "SELECT count(*) FROM (SELECT DISTINCT email FROM people) AS d",
    "SELECT min(length(e)) FROM (SELECT email AS e FROM people) AS d",
    "SELECT phone, count(*) FROM people GROUP BY 1 ORDER BY 1",
    "SELECT coalesce(salary, 0) FROM people ORDER BY 1",
    "SELECT email = email FROM people",
    "SELECT id FROM people NATURAL JOIN people AS q ORDER BY id",
)


def statements() -> list[str]:
    return [p.format(c=c) for p, c in itertools.product(POSITIONS, COLUMNS)] + list(HOSTILE)


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
                tmp_path_factory.mktemp(f"masks_{dialect}"),
                fill=fill,
                keep=("people", "teams"),
            )
        return made[dialect]

    yield get
    for pair in made.values():
        drop_twins(pair)


def check(pair: Twins, policy: SafetyPolicy, sqls: list[str]) -> tuple[list, list]:
    va = SqlValidator(
        pair.dialect, policy, schema=pair.a.schema, default_schema=pair.a.default_schema
    )
    vb = SqlValidator(
        pair.dialect, policy, schema=pair.b.schema, default_schema=pair.b.default_schema
    )
    harmful, accepted = [], []
    for sql in sqls:
        ra, rb = va.validate(sql), vb.validate(sql)
        if ra.ok != rb.ok:
            harmful.append(("verdicts differ", sql))
        if not ra.ok:
            continue
        accepted.append(sql)
        if same(pair.a.outcome(ra.sql or ""), pair, "a") != same(
            pair.b.outcome(rb.sql or ""), pair, "b"
        ):
            harmful.append(
                (sql, ra.sql, pair.a.outcome(ra.sql or ""), pair.b.outcome(rb.sql or ""))
            )
    return harmful, accepted


@pytest.mark.parametrize("dialect", ENGINES)
class TestMasksOnTwins:
    @pytest.mark.parametrize("policy", [DENY, ALLOW], ids=["deny-list", "allow-list"])
    def test_no_accepted_statement_tells_a_hidden_part(self, twins, dialect, policy):
        pair = twins(dialect)
        harmful, accepted = check(pair, policy, statements())
        assert not harmful, harmful[:5]
        # masked columns stay selectable (through the mask) and countable
        assert "SELECT email FROM people ORDER BY id" in accepted
        assert "SELECT count(DISTINCT phone) FROM people" in accepted
        assert "SELECT * FROM people ORDER BY id" in accepted
        assert "SELECT id FROM people WHERE email LIKE 'j%' ORDER BY id" not in accepted

    def test_masked_values_show_their_visible_parts(self, twins, dialect):
        pair = twins(dialect)
        validator = SqlValidator(
            dialect, DENY, schema=pair.a.schema, default_schema=pair.a.default_schema
        )
        sql = validator.validate("SELECT email, phone, salary FROM people ORDER BY id").sql or ""
        kind, rows = pair.a.outcome(sql)
        assert kind == "rows", rows
        assert [tuple(r) for r in rows] == [
            ("j***@example.org", "***1234", None),
            ("j***@corp.example", "***4321", None),
            (None, "***", None),
            ("***", "***", None),
        ]

    def test_without_the_validator_the_statements_differ(self, twins, dialect):
        pair = twins(dialect)
        leaks = [
            sql
            for sql in statements()
            if same(pair.a.outcome(sql), pair, "a") != same(pair.b.outcome(sql), pair, "b")
        ]
        assert len(leaks) >= 40, (len(leaks), leaks[:5])

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        position=st.sampled_from(POSITIONS),
        column=st.sampled_from(COLUMNS),
        wrap=st.sampled_from(
            ("{s}", "SELECT * FROM ({s}) AS g", "WITH g AS ({s}) SELECT * FROM g")
        ),
    )
    def test_generated_compositions(self, twins, dialect, position, column, wrap):
        pair = twins(dialect)
        inner = position.format(c=column)
        # an ORDER BY inside a derived table orders nothing: wrap only what has none
        sql = inner if "ORDER BY" in inner else wrap.format(s=inner)
        harmful, _ = check(pair, DENY, [sql])
        assert not harmful, harmful


def test_the_policy_file_masks_and_a_role_adds_masks():
    policy = Policy.from_data(
        {
            "columns": {"mask": {"people.email": "email"}},
            "roles": {
                "analyst": {"columns": {"mask": {"people.email": "null", "people.phone": "last4"}}}
            },
        }
    )
    assert policy.safety_policy().masked_columns == (("people.email", "email"),)
    analyst = policy.for_role("analyst").safety_policy()
    assert dict(analyst.masked_columns) == {"people.email": "null", "people.phone": "last4"}
    assert policy.protects_columns


def test_an_unknown_mask_is_refused():
    with pytest.raises(ValueError):
        SafetyPolicy(masked_columns=(("people.email", "rot13"),))
