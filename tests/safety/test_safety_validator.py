"""The validator on its own: statement shape, tree walk, functions, star, LIMIT, messages."""

import json

import pytest

from safety import SafetyFinding, SafetyPolicy, SqlValidator, ValidationResult

SCHEMA = {"users": ["id", "name", "email"], "orders": ["id", "user_id", "total"]}


def validate(sql, dialect="sqlite", **policy):
    return SqlValidator(dialect=dialect, policy=SafetyPolicy(**policy), schema=SCHEMA).validate(sql)


# (title, dialect, sql, expected refusal code)
REFUSED = [
    # sqlglot reads it as ``U & "d\0061ta"``: two columns the table does not have
    (
        "postgres unicode escape names no column",
        "postgres",
        'SELECT U&"d\\0061ta" FROM users',
        "unresolved_column",
    ),
    ("two statements", "sqlite", "SELECT 1; DROP TABLE users", "multiple_statements"),
    (
        "select then delete",
        "postgres",
        "SELECT id FROM users; DELETE FROM users",
        "multiple_statements",
    ),
    ("empty text", "sqlite", "", "empty_statement"),
    ("blanks only", "sqlite", "  \n ; ", "empty_statement"),
    ("comment only", "sqlite", "-- nothing here", "empty_statement"),
    ("block comment only", "postgres", "/* nothing */", "empty_statement"),
    ("unparseable", "sqlite", "SELECT FROM WHERE (", "parse_error"),
    ("unterminated string", "postgres", "SELECT 'abc", "parse_error"),
    ("bare delete", "sqlite", "DELETE FROM users", "not_a_query"),
    ("comment-prefixed delete", "sqlite", "/* x */ DELETE FROM users", "not_a_query"),
    ("drop", "postgres", "DROP TABLE users", "not_a_query"),
    ("update", "mysql", "UPDATE users SET name = 'x'", "not_a_query"),
    (
        "insert select",
        "postgres",
        "INSERT INTO users SELECT id, name, email FROM users",
        "not_a_query",
    ),
    ("explain analyze delete", "postgres", "EXPLAIN ANALYZE DELETE FROM users", "not_a_query"),
    ("copy to file", "postgres", "COPY users TO '/tmp/users.csv'", "not_a_query"),
    ("attach", "sqlite", "ATTACH DATABASE '/tmp/x.db' AS x", "not_a_query"),
    ("pragma write", "sqlite", "PRAGMA writable_schema = 1", "not_a_query"),
    ("vacuum into", "sqlite", "VACUUM INTO '/tmp/copy.db'", "not_a_query"),
    ("set", "postgres", "SET default_transaction_read_only = off", "not_a_query"),
    ("begin", "postgres", "BEGIN", "not_a_query"),
    ("commit", "mysql", "COMMIT", "not_a_query"),
    ("install", "duckdb", "INSTALL httpfs", "not_a_query"),
    ("load", "duckdb", "LOAD httpfs", "not_a_query"),
    ("values", "postgres", "VALUES (1)", "not_a_query"),
    (
        "delete in cte",
        "postgres",
        "WITH d AS (DELETE FROM users RETURNING id) SELECT id FROM d",
        "dml_in_tree",
    ),
    (
        "update in cte",
        "duckdb",
        "WITH d AS (UPDATE users SET name = 'x' RETURNING id) SELECT id FROM d",
        "dml_in_tree",
    ),
    (
        "insert in cte",
        "postgres",
        "WITH d AS (INSERT INTO users (id) VALUES (9) RETURNING id) SELECT id FROM d",
        "dml_in_tree",
    ),
    ("select into", "postgres", "SELECT id INTO stolen FROM users", "select_into"),
    ("select into variable", "mysql", "SELECT id INTO @x FROM users LIMIT 1", "select_into"),
    ("for update", "postgres", "SELECT id FROM users FOR UPDATE", "locking_clause"),
    ("for share", "postgres", "SELECT id FROM users FOR SHARE", "locking_clause"),
    ("lock in share mode", "mysql", "SELECT id FROM users LOCK IN SHARE MODE", "locking_clause"),
    (
        "for update in subquery",
        "postgres",
        "SELECT n FROM (SELECT id AS n FROM users FOR UPDATE) AS s",
        "locking_clause",
    ),
    (
        "optimizer hint",
        "mysql",
        "SELECT /*+ MAX_EXECUTION_TIME(100000) */ id FROM users",
        "optimizer_hint",
    ),
    ("pg_sleep", "postgres", "SELECT pg_sleep(10)", "function_denied"),
    ("schema-qualified pg_sleep", "postgres", "SELECT pg_catalog.pg_sleep(10)", "function_denied"),
    ("pg_read_file", "postgres", "SELECT pg_read_file('/etc/passwd')", "function_denied"),
    (
        "set_config",
        "postgres",
        "SELECT set_config('default_transaction_read_only', 'off', false)",
        "function_denied",
    ),
    ("advisory lock", "postgres", "SELECT pg_advisory_lock(1)", "function_denied"),
    (
        "dblink",
        "postgres",
        "SELECT x FROM dblink('host=evil', 'select 1') AS t(x int)",
        "function_denied",
    ),
    (
        "query_to_xml",
        "postgres",
        "SELECT query_to_xml('delete from users', true, true, '')",
        "function_denied",
    ),
    ("lo_import", "postgres", "SELECT lo_import('/etc/passwd')", "function_denied"),
    ("nextval", "postgres", "SELECT nextval('users_id_seq')", "function_denied"),
    ("mysql sleep", "mysql", "SELECT SLEEP(10)", "function_denied"),
    ("mysql benchmark", "mysql", "SELECT BENCHMARK(100000000, MD5('a'))", "function_denied"),
    ("mysql load_file", "mysql", "SELECT LOAD_FILE('/etc/passwd')", "function_denied"),
    ("mysql get_lock", "mysql", "SELECT GET_LOCK('x', 10)", "function_denied"),
    ("mysql into outfile", "mysql", "SELECT id FROM users INTO OUTFILE '/tmp/x'", "parse_error"),
    ("sqlite load_extension", "sqlite", "SELECT load_extension('/tmp/evil.so')", "function_denied"),
    ("sqlite randomblob", "sqlite", "SELECT randomblob(1000000000)", "function_denied"),
    ("sqlite fts3_tokenizer", "sqlite", "SELECT fts3_tokenizer('simple')", "function_denied"),
    ("duckdb read_csv", "duckdb", "SELECT a FROM read_csv('/etc/passwd')", "function_denied"),
    (
        "duckdb read_parquet",
        "duckdb",
        "SELECT a FROM read_parquet('s3://bucket/x.parquet')",
        "function_denied",
    ),
    (
        "duckdb read_text",
        "duckdb",
        "SELECT content FROM read_text('/etc/passwd')",
        "function_denied",
    ),
    ("duckdb glob", "duckdb", "SELECT file FROM glob('/etc/*')", "function_denied"),
    ("duckdb query", "duckdb", "SELECT x FROM query('DELETE FROM users')", "function_denied"),
    ("duckdb getenv", "duckdb", "SELECT getenv('HOME')", "function_denied"),
    ("duckdb file as table", "duckdb", "SELECT a FROM '/etc/passwd'", "file_as_table"),
    ("duckdb csv as table", "duckdb", "SELECT a FROM 'users.csv'", "file_as_table"),
    ("unknown function", "postgres", "SELECT my_udf(id) FROM users", "function_not_allowed"),
    ("select star", "sqlite", "SELECT * FROM users", "select_star"),
    ("qualified star", "sqlite", "SELECT u.* FROM users AS u", "select_star"),
    (
        "star in union branch",
        "sqlite",
        "SELECT id FROM users UNION SELECT * FROM orders",
        "select_star",
    ),
    ("table shorthand", "postgres", "TABLE users", "select_star"),
    ("non-literal limit", "postgres", "SELECT id FROM users LIMIT (SELECT 5)", "limit_not_literal"),
]


@pytest.mark.parametrize(
    ("dialect", "sql", "code"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_refused(dialect, sql, code):
    result = validate(sql, dialect, star="reject")
    assert not result.ok
    assert result.sql is None
    assert result.refusal is not None
    assert result.refusal.code == code, result.findings
    assert result.refusal.severity == "error"
    assert result.refusal.message.endswith(".") or result.refusal.code == "parse_error"


# (title, dialect, sql, expected SQL to run)
ACCEPTED = [
    ("limit added", "sqlite", "select name from users", "SELECT name FROM users LIMIT 1001"),
    ("limit kept", "sqlite", "SELECT name FROM users LIMIT 5", "SELECT name FROM users LIMIT 5"),
    (
        "limit lowered",
        "sqlite",
        "SELECT name FROM users LIMIT 50000",
        "SELECT name FROM users LIMIT 1001",
    ),
    (
        "mysql offset limit lowered",
        "mysql",
        "SELECT name FROM users LIMIT 10, 5000",
        "SELECT name FROM users LIMIT 1001 OFFSET 10",
    ),
    (
        "union gets one outer limit",
        "sqlite",
        "SELECT id FROM users UNION SELECT id FROM orders",
        "SELECT id FROM users UNION SELECT id FROM orders LIMIT 1001",
    ),
    (
        "union limit lowered",
        "postgres",
        "SELECT id FROM users UNION ALL SELECT id FROM orders LIMIT 99999",
        "SELECT id FROM users UNION ALL SELECT id FROM orders LIMIT 1001",
    ),
    (
        "intersect",
        "postgres",
        "SELECT id FROM users INTERSECT SELECT user_id FROM orders",
        "SELECT id FROM users INTERSECT SELECT user_id FROM orders LIMIT 1001",
    ),
    (
        "fetch first lowered",
        "postgres",
        "SELECT id FROM users FETCH FIRST 5000 ROWS ONLY",
        "SELECT id FROM users FETCH FIRST 1001 ROWS ONLY",
    ),
    (
        "cte select",
        "postgres",
        "WITH big AS (SELECT user_id, total FROM orders WHERE total > 100) SELECT user_id FROM big",
        "WITH big AS (SELECT user_id, total FROM orders WHERE total > 100) SELECT user_id FROM big LIMIT 1001",
    ),
    (
        "count star is not select star",
        "sqlite",
        "SELECT COUNT(*) FROM users",
        "SELECT COUNT(*) FROM users LIMIT 1001",
    ),
    (
        "exists star is fine",
        "postgres",
        "SELECT name FROM users AS u WHERE EXISTS (SELECT * FROM orders AS o WHERE o.user_id = u.id)",
        "SELECT name FROM users AS u WHERE EXISTS(SELECT * FROM orders AS o WHERE o.user_id = u.id) LIMIT 1001",
    ),
    (
        "parenthesised query",
        "sqlite",
        "(SELECT name FROM users)",
        "SELECT name FROM users LIMIT 1001",
    ),
    (
        "comments dropped",
        "sqlite",
        "SELECT name /* DROP TABLE users */ FROM users -- bye",
        "SELECT name FROM users LIMIT 1001",
    ),
    (
        "window and aggregate functions",
        "postgres",
        "SELECT user_id, SUM(total) OVER (PARTITION BY user_id), ROW_NUMBER() OVER (ORDER BY total) FROM orders",
        "SELECT user_id, SUM(total) OVER (PARTITION BY user_id), "
        "ROW_NUMBER() OVER (ORDER BY total) FROM orders LIMIT 1001",
    ),
    (
        "trailing semicolon",
        "sqlite",
        "SELECT name FROM users;",
        "SELECT name FROM users LIMIT 1001",
    ),
]


@pytest.mark.parametrize(
    ("dialect", "sql", "expected"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED]
)
def test_accepted(dialect, sql, expected):
    result = validate(sql, dialect)
    assert result.ok, result.findings
    assert result.refusal is None
    assert result.sql == expected


def test_mysql_executable_comments_are_refused_not_dropped():
    for text in (
        "SELECT name FROM users /*! ; DROP TABLE users */",
        "SELECT name FROM users /*!50000 ; DROP TABLE users */",
        "SELECT /*M!100000 1, */ name FROM users",
    ):
        assert validate(text, "mysql").refusal.code == "executable_comment", text
    # An ordinary comment, and the same characters inside a string, are not executable comments.
    assert validate("SELECT name FROM users /* note */", "mysql").ok
    assert validate("SELECT '/*!50000 x */' AS t FROM users", "mysql").ok
    # Elsewhere /*! is an ordinary comment, dropped from the SQL that runs.
    assert (
        validate("SELECT name FROM users /*! DROP */", "postgres").sql
        == "SELECT name FROM users LIMIT 1001"
    )


def test_rewrites_are_findings():
    result = validate("SELECT name FROM users LIMIT 5000")
    assert [f.code for f in result.findings] == ["limit_lowered"]
    assert result.findings[0].severity == "rewrite"
    assert validate("SELECT name FROM users").findings[0].code == "limit_added"


def test_limit_policy_can_be_switched_off():
    assert validate("SELECT name FROM users", enforce_limit=False).sql == "SELECT name FROM users"


def test_custom_cap():
    assert validate("SELECT name FROM users LIMIT 500", max_limit=100).sql.endswith("LIMIT 101")


def test_every_finding_names_the_node():
    result = validate("WITH d AS (DELETE FROM users RETURNING id) SELECT id FROM d", "postgres")
    finding = result.refusal
    assert finding.code == "dml_in_tree"
    assert finding.node == "Delete"
    assert "DELETE" in finding.message and "CTE d" in finding.message


def test_dml_in_subquery_is_found_anywhere():
    sql = (
        "SELECT id FROM users WHERE id IN "
        "(SELECT id FROM (WITH d AS (DELETE FROM orders RETURNING id) SELECT id FROM d) s)"
    )
    result = validate(sql, "postgres")
    assert result.refusal.code == "dml_in_tree"


def test_multiple_statements_message_names_them():
    finding = validate("SELECT 1; DROP TABLE users").refusal
    assert "DROP" in finding.message and "2" in finding.message


def test_select_star_message_lists_the_columns():
    finding = validate("SELECT * FROM users", star="reject").refusal
    assert finding.code == "select_star"
    assert "id, name, email" in finding.message
    assert "explicitly" in finding.message


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT * FROM users", "SELECT id, name, email FROM users LIMIT 1001"),
        ("SELECT u.* FROM users AS u", "SELECT u.id, u.name, u.email FROM users AS u LIMIT 1001"),
        (
            "SELECT * FROM users JOIN orders ON orders.user_id = users.id",
            "SELECT users.id, users.name, users.email, orders.id, orders.user_id, orders.total "
            "FROM users JOIN orders ON orders.user_id = users.id LIMIT 1001",
        ),
        (
            "SELECT * FROM (SELECT id, name FROM users) AS s",
            "SELECT id, name FROM (SELECT id, name FROM users) AS s LIMIT 1001",
        ),
        (
            "WITH r AS (SELECT * FROM orders) SELECT * FROM r",
            "WITH r AS (SELECT id, user_id, total FROM orders) SELECT id, user_id, total FROM r LIMIT 1001",
        ),
    ],
)
def test_star_expanded_with_schema(sql, expected):
    result = validate(sql, star="expand")
    assert result.ok, result.findings
    assert result.sql == expected
    assert "star_expanded" in [f.code for f in result.findings]


def test_star_on_unknown_table_is_refused_even_when_expanding():
    result = validate("SELECT * FROM audit_log", star="expand")
    assert result.refusal.code == "select_star"


def test_star_expand_without_schema_refuses():
    result = SqlValidator("sqlite", SafetyPolicy(star="expand")).validate("SELECT * FROM users")
    assert result.refusal.code == "select_star"


def test_result_is_json_serialisable():
    result = validate("SELECT * FROM users; DROP TABLE users")
    data = json.loads(result.model_dump_json())
    assert data["ok"] is False
    assert data["refusal"]["code"] == "multiple_statements"
    assert ValidationResult.model_validate(data).refusal == result.refusal


def test_finding_model():
    finding = SafetyFinding(
        code="dml_in_tree",
        message="DELETE inside a CTE is not allowed",
        severity="error",
        node="Delete",
    )
    assert finding.blocking
    assert SafetyFinding.model_validate_json(finding.model_dump_json()) == finding


def test_unknown_dialect_is_refused_at_construction():
    from safety import UnsupportedDialect

    with pytest.raises(UnsupportedDialect):
        SqlValidator("oracle")


def test_extra_functions_extend_the_allowlist():
    assert (
        validate("SELECT my_udf(id) FROM users", "postgres").refusal.code == "function_not_allowed"
    )
    assert validate("SELECT my_udf(id) FROM users", "postgres", extra_functions=("my_udf",)).ok


def test_extra_functions_never_override_the_denylist():
    assert (
        validate("SELECT pg_sleep(1)", "postgres", extra_functions=("pg_sleep",)).refusal.code
        == "function_denied"
    )


def test_denied_functions_extend_the_denylist():
    assert (
        validate(
            "SELECT upper(name) FROM users", "postgres", denied_functions=("upper",)
        ).refusal.code
        == "function_denied"
    )


def test_raw_text_is_never_returned():
    result = validate("select   name\nfrom users -- note")
    assert result.sql == "SELECT name FROM users LIMIT 1001"
    assert result.original == "select   name\nfrom users -- note"


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [
        ("postgres", "SELECT passwd FROM pg_shadow"),
        ("postgres", "SELECT rolpassword FROM pg_catalog.pg_authid"),
        ("postgres", "SELECT table_name FROM information_schema.tables"),
        ("mysql", "SELECT authentication_string FROM mysql.user"),
        ("sqlite", "SELECT sql FROM sqlite_master"),
        ("duckdb", "SELECT name FROM duckdb_settings"),
    ],
)
def test_catalog_tables_are_refused_by_default(dialect, sql):
    assert validate(sql, dialect).refusal.code == "system_table"
    assert validate(sql, dialect, allow_system_tables=True).ok
