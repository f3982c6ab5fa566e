"""The finding-code registry: every code the validator emits has a kind, and what the pipeline
sends to self-correction is derived from those kinds, so the two cannot drift apart."""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path

import pytest
import sqlglot
from safety_corpora import require, spider_dev, spider_schemas, text2sql
from sqlglot import exp

from orchestrator.core.stages.approval import CORRECTABLE_REFUSALS
from safety import (
    CORRECTABLE_CODES,
    FINDING_CODES,
    FindingKind,
    SafetyFinding,
    SafetyPolicy,
    SqlValidator,
    UnregisteredFindingCode,
    kind_of,
)
from safety.codes import codes_of
from safety.rules import RULES, RuleContext, check_statements_in_tree

SAFETY = Path(__file__).resolve().parents[2] / "safety"

SCHEMA = {
    "pets": ["petid", "pettype", "pet_age"],
    "owners": ["ownerid", "name", "email", "petid"],
    "audit": ["id", "who"],
    "vet": ["id"],
}
DENY = SafetyPolicy(denied_columns=("owners.email",), denied_tables=("audit",))
MASK = SafetyPolicy(masked_columns=(("owners.email", "email"),))
ROWS = SafetyPolicy(row_filters=(("pets", "pettype = {user.kind}"),))
ALLOW = SafetyPolicy(
    allowed_tables=("pets", "owners"),
    allowed_columns=("pets.petid", "pets.pettype", "owners.name", "owners.petid"),
)

#: One statement per registered code, each emitting it: (code, dialect, policy, schema, SQL).
EXAMPLES = [
    ("unresolved_table", "postgres", DENY, SCHEMA, "SELECT petid FROM ghosts"),
    ("unresolved_column", "postgres", DENY, SCHEMA, 'SELECT petid FROM pets WHERE pettype = "cat"'),
    (
        "unresolved_reference",
        "postgres",
        DENY,
        SCHEMA,
        "SELECT name FROM pets JOIN owners USING (x)",
    ),
    ("table_not_allowed", "postgres", ALLOW, SCHEMA, "SELECT id FROM vet"),
    ("table_denied", "postgres", DENY, SCHEMA, "SELECT who FROM audit"),
    ("column_not_allowed", "postgres", ALLOW, SCHEMA, "SELECT pet_age FROM pets"),
    ("column_denied", "postgres", DENY, SCHEMA, "SELECT email FROM owners"),
    ("function_not_allowed", "postgres", None, None, "SELECT my_udf(1)"),
    ("parse_error", "sqlite", None, None, "SELECT FROM WHERE"),
    ("select_star", "sqlite", SafetyPolicy(star="reject"), None, "SELECT * FROM pets"),
    ("nested_star", "postgres", None, SCHEMA, "SELECT count(p.*) FROM pets p"),
    ("column_selector", "duckdb", None, SCHEMA, "SELECT COLUMNS('pet.*') FROM pets"),
    ("positional_reference", "duckdb", None, SCHEMA, "SELECT #1 FROM pets"),
    ("whole_row_reference", "postgres", DENY, SCHEMA, "SELECT pets FROM pets"),
    ("opaque_reference", "duckdb", DENY, SCHEMA, "SELECT email.upper() FROM owners"),
    ("unsupported_node", "sqlite", None, None, "SELECT a FROM t WHERE a = ?"),
    ("limit_not_literal", "sqlite", None, None, "SELECT a FROM t LIMIT x"),
    ("regexp_unsupported", "sqlite", None, None, "SELECT a FROM t WHERE a REGEXP 'x'"),
    ("empty_statement", "sqlite", None, None, "-- nothing"),
    ("multiple_statements", "sqlite", None, None, "SELECT 1; SELECT 2"),
    ("not_a_query", "postgres", None, None, "CREATE TABLE x (a int)"),
    ("empty_select", "mysql", None, None, "SELECT # a\n"),
    ("dml_in_tree", "sqlite", None, None, "WITH d AS (DELETE FROM t RETURNING a) SELECT a FROM d"),
    ("select_into", "postgres", None, None, "SELECT a INTO newt FROM t"),
    ("locking_clause", "postgres", None, None, "SELECT a FROM t FOR UPDATE"),
    ("optimizer_hint", "mysql", None, None, "SELECT /*+ NO_INDEX(t) */ a FROM t"),
    ("function_denied", "postgres", None, None, "SELECT pg_sleep(1)"),
    ("system_table", "postgres", None, None, "SELECT relname FROM pg_class"),
    ("file_as_table", "duckdb", None, None, "SELECT a FROM 'data.csv'"),
    (
        "executable_comment",
        "mysql",
        None,
        None,
        "SELECT a FROM t /*!50000 UNION SELECT b FROM u */",
    ),
    ("session_variable_write", "mysql", None, None, "SELECT @x := 1"),
    ("server_setting", "mysql", None, None, "SELECT @@version"),
    ("limit_added", "sqlite", None, None, "SELECT a FROM t"),
    ("limit_lowered", "sqlite", None, None, "SELECT a FROM t LIMIT 5000"),
    ("star_expanded", "sqlite", None, SCHEMA, "SELECT * FROM pets"),
    ("star_columns_omitted", "sqlite", DENY, SCHEMA, "SELECT * FROM owners"),
    ("schema_unknown", "sqlite", DENY, None, "SELECT a FROM t"),
    ("masked_column_use", "sqlite", MASK, SCHEMA, "SELECT name FROM owners WHERE email = 'x'"),
    ("column_masked", "sqlite", MASK, SCHEMA, "SELECT email FROM owners"),
    ("row_filter_unbound", "sqlite", ROWS, SCHEMA, "SELECT petid FROM pets"),
]
#: Codes no SQL text reaches here, each shown by its own test below (the view codes need view
#: definitions: tests/safety/test_safety_views.py).
REACHED_OTHERWISE = {
    "ambiguous_column",
    "ddl_in_tree",
    "command_in_tree",
    "validation_failed",
    "view_unreadable",
    "view_reads_protected",
    "row_filter_view",
    "rows_filtered",
}


def test_correctable_refusals_are_derived_from_the_registry() -> None:
    """The pipeline corrects exactly the refusals a model can fix, and every refusal that names
    something unknown or not allowed is one of them."""
    unknown_names = codes_of(FindingKind.UNKNOWN_NAME)
    assert CORRECTABLE_REFUSALS == CORRECTABLE_CODES
    assert CORRECTABLE_REFUSALS == unknown_names | codes_of(FindingKind.FIXABLE_FORM)
    assert unknown_names == {
        "unresolved_table",
        "unresolved_column",
        "unresolved_reference",
        "ambiguous_column",
        "table_not_allowed",
        "table_denied",
        "column_not_allowed",
        "column_denied",
        "function_not_allowed",
        "view_unreadable",
        "view_reads_protected",
        "row_filter_view",
    }
    assert not CORRECTABLE_REFUSALS & codes_of(FindingKind.FORBIDDEN, FindingKind.INTERNAL)


@pytest.mark.parametrize(
    ("code", "dialect", "policy", "schema", "sql"), EXAMPLES, ids=[e[0] for e in EXAMPLES]
)
def test_each_registered_code_is_emitted_by_its_example(code, dialect, policy, schema, sql) -> None:
    result = SqlValidator(dialect, policy=policy, schema=schema).validate(sql)
    assert code in result.codes, (sql, result.codes)


def test_the_examples_and_the_other_tests_cover_the_whole_registry() -> None:
    assert {e[0] for e in EXAMPLES} | REACHED_OTHERWISE == set(FINDING_CODES)


def test_names_that_do_not_exist_or_are_not_allowed_are_correctable() -> None:
    """Every refusal the validator gives for a name (the class of the issue, not one example)."""
    for code, dialect, policy, schema, sql in EXAMPLES:
        if kind_of(code) is FindingKind.UNKNOWN_NAME:
            result = SqlValidator(dialect, policy=policy, schema=schema).validate(sql)
            assert result.refusal is not None and result.refusal.code in CORRECTABLE_REFUSALS


def test_an_unregistered_code_is_refused_when_a_finding_is_made() -> None:
    with pytest.raises(ValueError, match="not registered"):
        SafetyFinding(code="made_up_code", message="x")
    with pytest.raises(UnregisteredFindingCode):
        kind_of("made_up_code")


def test_a_rule_reporting_an_unregistered_code_fails_loudly_not_as_a_refusal() -> None:
    def rogue(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
        ctx.report("brand_new_code", "a rule added without registering its code")
        return expression

    validator = SqlValidator("sqlite", rules=(*RULES, rogue))
    with pytest.raises(UnregisteredFindingCode, match="brand_new_code"):
        validator.validate("SELECT a FROM t")


def test_a_failing_rule_is_validation_failed() -> None:
    def broken(expression: exp.Expression, ctx: RuleContext) -> exp.Expression:
        raise RuntimeError("boom")

    result = SqlValidator("sqlite", rules=(broken,)).validate("SELECT a FROM t")
    assert result.codes == ["validation_failed"] and not result.ok


@pytest.mark.parametrize(
    ("node", "code"), [(exp.Command, "command_in_tree"), (exp.Drop, "ddl_in_tree")]
)
def test_statements_nested_in_a_query_are_forbidden(node: type, code: str) -> None:
    tree = sqlglot.parse_one("SELECT a FROM t WHERE a IN (SELECT b FROM u)")
    inner = tree.find(exp.Subquery)
    assert inner is not None
    inner.set("this", node(this=exp.to_identifier("x")))
    ctx = RuleContext(dialect="sqlite", policy=SafetyPolicy(), functions=None)
    check_statements_in_tree(tree, ctx)
    assert [f.code for f in ctx.findings] == [code]
    assert kind_of(code) is FindingKind.FORBIDDEN


def test_an_ambiguous_column_from_the_resolver_is_registered_and_correctable() -> None:
    from safety.resolve import _QUALIFY_CODES

    mapped = {code for _, code in _QUALIFY_CODES}
    assert "ambiguous_column" in mapped
    assert mapped <= CORRECTABLE_REFUSALS


def _literal_codes() -> set[tuple[str, str]]:
    """(file, code) for every code written as a literal where a finding is made in safety/."""
    makers = {"report", "Problem", "FunctionVerdict", "SafetyFinding"}
    found: set[tuple[str, str]] = set()
    for path in sorted(SAFETY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name not in makers:
                continue
            args = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "code")]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add((path.name, arg.value))
    return found


def test_every_literal_code_in_the_safety_package_is_registered() -> None:
    literal = _literal_codes()
    assert len(literal) > 20
    assert {(f, c) for f, c in literal if c not in FINDING_CODES} == set()


def test_every_code_emitted_on_the_corpora_and_attacks_is_registered() -> None:
    """Spider and text2sql-data gold SQL under a column policy, and SQL-injection payloads spliced
    into queries: whatever the validator finds has a kind (an unregistered code would raise)."""
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    seen: dict[str, int] = {}
    schemas = spider_schemas()
    for entry in spider_dev()[::3]:
        schema = schemas[entry["db_id"]]
        first = next(iter(schema))
        policy = SafetyPolicy(denied_columns=(f"{first}.{schema[first][0]}",))
        for code in (
            SqlValidator("sqlite", policy=policy, schema=schema).validate(entry["query"]).codes
        ):
            seen[code] = seen.get(code, 0) + 1
    for _dataset, sql in text2sql()[::20]:
        for code in SqlValidator("mysql").validate(sql).codes:
            seen[code] = seen.get(code, 0) + 1
    root = require("sqli_payloads", "Intruder")
    payloads = sorted(
        {
            line
            for path in sorted(root.rglob("*.txt"))
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
            if line.strip()
        }
    )
    templates = (
        "SELECT name FROM owners WHERE name = '{p}'",
        "SELECT name FROM owners WHERE ownerid = {p}",
    )
    for dialect in ("sqlite", "postgres", "mysql", "duckdb"):
        validator = SqlValidator(dialect, policy=DENY, schema=SCHEMA)
        for template in templates:
            for payload in payloads[::7]:
                for code in validator.validate(template.replace("{p}", payload)).codes:
                    seen[code] = seen.get(code, 0) + 1
    assert set(seen) <= set(FINDING_CODES)
    # the sweep meets names that do not exist (payloads name tables and columns of their own)
    assert seen.keys() & codes_of(FindingKind.UNKNOWN_NAME), json.dumps(seen)
    assert seen.keys() & codes_of(FindingKind.FORBIDDEN), json.dumps(seen)
