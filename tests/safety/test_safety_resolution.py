"""Semantic resolution on the validator alone: every reference ends at a real column, or is refused."""

import pytest

from safety import SafetyPolicy, SchemaCatalog, SqlValidator

SCHEMA = {
    "users": ["id", "name", "email"],
    "orders": ["id", "user_id", "total"],
    "crm.users": ["id", "phone"],
}
POLICY = SafetyPolicy(
    allowed_tables=("users", "orders"), denied_columns=("users.email", "crm.users.phone")
)


def code(sql, dialect="postgres", policy=POLICY, schema=SCHEMA, **kwargs):
    result = SqlValidator(dialect, policy, schema=schema, **kwargs).validate(sql)
    return result.refusal.code if result.refusal else None


_UNIT_CASES = [
    # alias column lists map back by position
    ("SELECT c.y FROM users AS c(x, y, z)", None),
    ("SELECT c.z FROM users AS c(x, y, z)", "column_denied"),
    ("SELECT z FROM users AS c(x, y, z)", "column_denied"),
    ("SELECT c.email FROM users AS c(x, y)", "column_denied"),  # the third keeps its name
    ("SELECT c.id FROM users AS c(x, y)", "unresolved_column"),  # renamed away
    ("SELECT s.q FROM (SELECT id, email FROM users) AS s(p, q)", "column_denied"),
    ("WITH c(p, q) AS (SELECT id, email FROM users) SELECT q FROM c", "column_denied"),
    ("WITH c(p, q) AS (SELECT id, name FROM users) SELECT q FROM c", None),
    # whole-row references and stars inside expressions
    ("SELECT c FROM users AS c", "whole_row_reference"),
    ("SELECT c::text FROM users AS c", "whole_row_reference"),
    ("SELECT row_to_json(c) FROM users AS c", "whole_row_reference"),
    ("SELECT (c).email FROM users AS c", "whole_row_reference"),
    ("SELECT c.fn FROM users AS c", "unresolved_column"),  # fn(c) in PostgreSQL
    ("SELECT CAST(c.* AS TEXT) FROM users AS c", "nested_star"),
    ("SELECT 'x' || c.* FROM users AS c", "nested_star"),
    ("SELECT count(c.*) FROM users AS c", "nested_star"),
    ("SELECT count(*) FROM users", None),
    # joins, set operations, lateral, correlation
    ("SELECT id FROM users JOIN orders USING (id)", None),
    ("SELECT email FROM users NATURAL JOIN orders", "column_denied"),
    ("SELECT id FROM users UNION SELECT email FROM users", "column_denied"),
    ("SELECT l.e FROM users AS u, LATERAL (SELECT u.email AS e) AS l", "column_denied"),
    ("SELECT l.e FROM users AS u CROSS JOIN LATERAL (SELECT u.name AS e) AS l", None),
    (
        "SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM users WHERE users.email = 'a')",
        "column_denied",
    ),
    (
        "SELECT name FROM users WHERE id IN (SELECT user_id FROM orders WHERE total > users.id)",
        None,
    ),
    # output aliases: alone they are the alias; inside an expression they may be the column
    ("SELECT name AS n FROM users ORDER BY n", None),
    ("SELECT name AS email FROM users ORDER BY email || ''", "column_denied"),
    ("SELECT name AS email FROM users WHERE email = 'a'", "column_denied"),
    # schemas: the default one made explicit, another one refused
    ("SELECT id FROM public.users", None),
    ("SELECT id FROM crm.users", "table_not_allowed"),
    ("SELECT id FROM nowhere.users", "table_not_allowed"),
    ("SELECT id FROM ghost", "table_not_allowed"),
    ("SELECT ghost FROM users", "unresolved_column"),
    ("SELECT id FROM otherdb.public.users", "unresolved_table"),
]


@pytest.mark.parametrize(("sql", "expected"), _UNIT_CASES)
def test_references_resolve_or_are_refused(sql, expected):
    assert code(sql) == expected


def test_unknown_table_is_refused_when_only_deny_rules_exist():
    policy = SafetyPolicy(denied_columns=("users.email",))
    assert code("SELECT id FROM ghost", policy=policy) == "unresolved_table"
    assert code("SELECT id FROM crm.users", policy=policy) is None
    assert code("SELECT phone FROM crm.users", policy=policy) is None


def test_qualified_deny_entry_only_hits_its_schema():
    policy = SafetyPolicy(denied_columns=("crm.users.phone",), denied_tables=("public.orders",))
    assert code("SELECT phone FROM crm.users", policy=policy) == "column_denied"
    assert code("SELECT email FROM users", policy=policy) is None
    assert code("SELECT id FROM orders", policy=policy) == "table_denied"


def test_bare_deny_entry_hits_every_schema_and_bare_allow_only_the_default():
    deny = SafetyPolicy(denied_tables=("users",))
    assert code("SELECT id FROM crm.users", policy=deny) == "table_denied"
    allow = SafetyPolicy(allowed_tables=("users",))
    assert code("SELECT id FROM users", policy=allow) is None
    assert code("SELECT id FROM crm.users", policy=allow) == "table_not_allowed"
    allow_crm = SafetyPolicy(allowed_tables=("crm.users",))
    assert code("SELECT id FROM crm.users", policy=allow_crm) is None
    assert code("SELECT id FROM users", policy=allow_crm) == "table_not_allowed"


def test_mysql_default_schema_is_the_database():
    schema = {"shop.users": ["id", "email"], "other.users": ["id", "email"]}
    policy = SafetyPolicy(allowed_tables=("users",), denied_columns=("email",))
    kwargs = {"dialect": "mysql", "policy": policy, "schema": schema, "default_schema": "shop"}
    assert code("SELECT id FROM users", **kwargs) is None
    assert code("SELECT id FROM shop.users", **kwargs) is None
    assert code("SELECT id FROM other.users", **kwargs) == "table_not_allowed"
    assert (
        code("SELECT `EMAIL` FROM `users`", **kwargs) == "column_denied"
    )  # MySQL ignores column case


def test_schema_shapes_are_equivalent():
    flat = SchemaCatalog({"users": ["id"]}, "postgres")
    qualified = SchemaCatalog({"public.users": ["id"]}, "postgres")
    nested = SchemaCatalog({"public": {"users": ["id"]}}, "postgres")
    assert (
        flat.columns(None, "users")
        == qualified.columns("public", "users")
        == nested.columns("public", "users")
    )
    assert SchemaCatalog({"users": ["id"]}, "mysql", "shop").columns("shop", "users") == ["id"]


def test_duckdb_selectors_and_positional_references():
    policy = SafetyPolicy(denied_columns=("users.email",))
    for sql in (
        "SELECT COLUMNS('e.*') FROM users",
        "SELECT max(COLUMNS(*)) FROM users",
        "SELECT COLUMNS(lambda c: c LIKE 'e%') FROM users",
        "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM users",
    ):
        assert code(sql, "duckdb", policy) == "column_selector", sql
    assert code("SELECT #3 FROM users", "duckdb", policy) == "positional_reference"
    # Lambdas are not columns.
    assert (
        code("SELECT list_transform([1, 2], x -> x + id) AS l FROM users", "duckdb", policy) is None
    )


def test_without_rules_every_reference_is_resolved_when_the_schema_is_known():
    assert code("SELECT ghost FROM nowhere", policy=SafetyPolicy()) == "unresolved_table"
    assert code("SELECT nosuch FROM users", policy=SafetyPolicy()) == "unresolved_column"
    assert code("SELECT name FROM users", policy=SafetyPolicy()) is None
    assert code("SELECT ghost FROM nowhere", policy=SafetyPolicy(), schema=None) is None
    strict = SafetyPolicy(require_resolution=True)
    assert code("SELECT ghost FROM users", policy=strict) == "unresolved_column"
    assert code("SELECT name FROM users", policy=strict) is None
    assert code("SELECT name FROM users", policy=strict, schema=None) == "schema_unknown"


def test_system_tables_on_resolved_names():
    for dialect, sql in (
        ("sqlite", "SELECT name FROM main.sqlite_master"),
        ("sqlite", "SELECT name FROM temp.sqlite_master"),
        ("duckdb", "SELECT sql FROM main.sqlite_master"),
        ("duckdb", "SELECT database_name FROM system.main.duckdb_databases"),
        ("postgres", "SELECT relname FROM pg_class"),
        ("postgres", "SELECT relname FROM public.pg_class"),
        ("postgres", "SELECT rolname FROM pg_catalog.pg_roles"),
        ("mysql", "SELECT User FROM mysql.user"),
        ("mysql", "SELECT table_name FROM information_schema.tables"),
    ):
        assert code(sql, dialect, SafetyPolicy(), None) == "system_table", (dialect, sql)


def test_sqlite_double_quoted_strings_become_literals_under_resolution():
    result = SqlValidator("sqlite", POLICY, schema=SCHEMA).validate(
        'SELECT name FROM users WHERE name = "Asia"'
    )
    assert result.sql == "SELECT name FROM users WHERE name = 'Asia' LIMIT 1001"
    # A double-quoted name that is a column stays a column (and is judged).
    assert code('SELECT "email" FROM users', "sqlite") == "column_denied"


def test_dialect_rules():
    v = SqlValidator("mysql", SafetyPolicy())
    assert v.validate("SELECT @v := 1").refusal.code == "session_variable_write"
    assert (
        v.validate("SELECT a FROM t WHERE (@v := 2) > 1").refusal.code == "session_variable_write"
    )
    assert v.validate("SELECT @@global.secure_file_priv").refusal.code == "server_setting"
    assert v.validate("SELECT @@hostname, @@x").refusal.code == "server_setting"
    assert v.validate("SELECT @v").ok  # reading a user variable changes nothing
    assert v.validate("SELECT a FROM t WHERE a REGEXP '^x'").sql == (
        "SELECT a FROM t WHERE (a REGEXP '^x') LIMIT 1001"
    )
    assert v.validate("SELECT a FROM t WHERE a RLIKE '^x'").sql.count("REGEXP") == 1
    sqlite = SqlValidator("sqlite", SafetyPolicy())
    assert sqlite.validate("SELECT a FROM t WHERE a REGEXP '(a+)+$'").refusal.code == (
        "regexp_unsupported"
    )
    assert sqlite.validate("SELECT @@hostname").refusal.code == "server_setting"
    # DuckDB's named arguments use := too, and are not session writes.
    assert SqlValidator("duckdb", SafetyPolicy()).validate("SELECT struct_pack(a := 1) AS s").ok


def test_star_expansion_on_schema_qualified_schemas():
    v = SqlValidator("postgres", SafetyPolicy(), schema=SCHEMA)
    assert v.validate("SELECT * FROM crm.users").sql == "SELECT id, phone FROM crm.users LIMIT 1001"
    assert v.validate("SELECT * FROM users AS c(x)").sql == (
        "SELECT x, name, email FROM users AS c(x) LIMIT 1001"
    )
    # USING / NATURAL merge columns: no per-table expansion, the star is refused.
    assert v.validate("SELECT * FROM users NATURAL JOIN orders").refusal.code == "select_star"
    # Denied columns are left out (by position through an alias column list too).
    denied = SqlValidator("postgres", POLICY, schema=SCHEMA)
    result = denied.validate("SELECT * FROM users AS c(x, y, z)")
    assert result.sql == "SELECT x, y FROM users AS c(x, y, z) LIMIT 1001"
    assert "star_columns_omitted" in result.codes


def _both(sql, dialect, catalog):
    import sqlglot
    from sqlglot import exp

    from safety.resolve import resolve, sqlite_quoted_strings
    from safety.resolve_fast import GIVE_UP, fast_resolve, needs_full

    tree = sqlglot.parse_one(sql, read=dialect)
    if dialect == "sqlite":
        sqlite_quoted_strings(tree, catalog)
    fast = None
    if not needs_full(list(tree.find_all(*GIVE_UP)), list(tree.find_all(exp.Star))):
        fast = fast_resolve(tree, catalog, dialect, list(tree.find_all(exp.Column)))
    return fast, resolve(tree, catalog, dialect)


def _columns(resolution):
    return {(c.schema, c.table, c.column) for c in resolution.columns}


@pytest.mark.parametrize("source", ["spider_dev", "spiderman", "unit"])
def test_fast_path_agrees_with_qualify(source):
    """Where the fast path answers, the full resolver accepts too and finds the same columns."""
    from safety_corpora import spider_dev, spider_schemas, spiderman_queries

    if source == "unit":
        catalog = SchemaCatalog(SCHEMA, "postgres")
        items = [(sql, "postgres", catalog) for sql, _ in _UNIT_CASES]
    else:
        schemas = spider_schemas()
        dialect = "sqlite" if source == "spider_dev" else "mysql"
        catalogs = {db: SchemaCatalog(s, dialect) for db, s in schemas.items()}
        pairs = (
            [(e["query"], e["db_id"]) for e in spider_dev()]
            if source == "spider_dev"
            else [
                (r["sql"], r["database"]) for r in spiderman_queries() if r["database"] in schemas
            ]
        )
        items = [(sql, dialect, catalogs[db]) for sql, db in pairs]
    answered = 0
    for sql, dialect, catalog in items:
        fast, full = _both(sql, dialect, catalog)
        if fast is None:
            continue
        answered += 1
        assert not full.problems, (sql, full.problems)
        assert not fast.problems, (sql, fast.problems)
        assert _columns(fast) == _columns(full), sql
    assert answered > (len(items) // 2 if source != "unit" else 5), answered


def test_catalog_functions_are_refused_by_prefix():
    for dialect, sql in (
        ("duckdb", "SELECT * FROM duckdb_tables()"),
        ("duckdb", "SELECT database_name FROM duckdb_databases()"),
        ("duckdb", "SELECT * FROM pragma_database_list()"),
        ("sqlite", "SELECT name FROM pragma_table_info('users')"),
    ):
        assert code(sql, dialect, SafetyPolicy(), None) == "function_denied", (dialect, sql)
