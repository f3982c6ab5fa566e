"""Table and column allowlists / denylists, after resolving aliases, CTEs and derived tables."""

import pytest

from safety import SafetyPolicy, SqlValidator

SCHEMA = {
    "users": ["id", "name", "email"],
    "orders": ["id", "user_id", "total"],
    "audit": ["id", "event"],
}
DENY = SafetyPolicy(denied_columns=("users.email",), denied_tables=("audit",))


def refusal(sql, policy=DENY, schema=SCHEMA, dialect="postgres"):
    result = SqlValidator(dialect, policy, schema=schema).validate(sql)
    return result.refusal.code if result.refusal else None


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT email FROM users",
        "SELECT u.email FROM users AS u",
        "SELECT e FROM (SELECT email AS e FROM users) AS x",
        "WITH c AS (SELECT email AS e FROM users) SELECT e FROM c",
        "WITH c AS (SELECT u.email FROM users AS u) SELECT c.email FROM c",
        "SELECT id FROM orders WHERE EXISTS "
        "(SELECT 1 FROM users AS u WHERE u.id = orders.user_id AND u.email LIKE 'a%')",
        "SELECT email FROM orders JOIN users ON users.id = orders.user_id",
        "SELECT name FROM users ORDER BY email",
        "SELECT UPPER(email) FROM users",
        "SELECT id FROM users UNION SELECT email FROM users",
    ],
)
def test_denied_column_is_found_through_aliases(sql):
    assert refusal(sql) == "column_denied"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM users",
        "SELECT COUNT(*) FROM users",
        "SELECT o.id, o.total FROM orders AS o",
        "SELECT email FROM (SELECT name AS email FROM users) AS x",  # the alias, not the column
        "WITH email AS (SELECT id FROM orders) SELECT id FROM email",
        "SELECT u.name AS email FROM users AS u",
    ],
)
def test_other_columns_pass(sql):
    assert refusal(sql) is None


def test_denied_table_even_under_an_alias_or_in_a_cte():
    assert refusal("SELECT a.event FROM audit AS a") == "table_denied"
    assert refusal("WITH x AS (SELECT event FROM audit) SELECT event FROM x") == "table_denied"


def test_cte_named_like_a_denied_table_is_not_the_table():
    assert refusal("WITH audit AS (SELECT id FROM orders) SELECT id FROM audit") is None


def test_table_allowlist():
    policy = SafetyPolicy(allowed_tables=("orders",))
    assert refusal("SELECT id FROM orders", policy) is None
    assert (
        refusal("SELECT o.id FROM orders AS o JOIN users AS u ON u.id = o.user_id", policy)
        == "table_not_allowed"
    )


def test_column_allowlist_with_table_and_bare_entries():
    policy = SafetyPolicy(allowed_columns=("id", "orders.total"))
    assert refusal("SELECT id, total FROM orders", policy) is None
    assert refusal("SELECT user_id FROM orders", policy) == "column_not_allowed"
    assert refusal("SELECT total FROM (SELECT total FROM orders) AS t", policy) is None


def test_whole_row_reference_is_refused_when_columns_are_restricted():
    assert refusal("SELECT users FROM users") == "whole_row_reference"
    assert refusal("SELECT u FROM users AS u") == "whole_row_reference"


def test_column_rules_without_a_schema_refuse_what_they_cannot_resolve():
    assert (
        refusal("SELECT email FROM orders JOIN users ON users.id = orders.user_id", schema=None)
        == "schema_unknown"
    )
    # Table rules need no schema: the table names are resolved syntactically.
    assert (
        refusal("SELECT id FROM audit", SafetyPolicy(denied_tables=("audit",)), None)
        == "table_denied"
    )


def test_bare_column_entry_applies_to_every_table():
    policy = SafetyPolicy(denied_columns=("total",))
    assert refusal("SELECT o.total FROM orders AS o", policy) == "column_denied"


def test_names_are_case_insensitive():
    policy = SafetyPolicy(denied_columns=("Users.Email",))
    assert refusal("SELECT EMAIL FROM USERS", policy) == "column_denied"
    assert refusal('SELECT "EMAIL" FROM USERS', policy, dialect="sqlite") == "column_denied"
    # PostgreSQL folds only unquoted names: "EMAIL" is not the column email, so it is unresolved.
    assert refusal('SELECT "EMAIL" FROM USERS', policy) == "unresolved_column"


def test_message_names_table_and_column():
    result = SqlValidator("postgres", DENY, schema=SCHEMA).validate(
        "WITH c AS (SELECT email AS e FROM users) SELECT e FROM c"
    )
    assert "users.email" in result.refusal.message and "CTE c" in result.refusal.message


def test_star_expansion_leaves_denied_columns_out():
    policy = SafetyPolicy(star="expand", denied_columns=("users.email",))
    result = SqlValidator("postgres", policy, schema=SCHEMA).validate("SELECT * FROM users")
    assert result.sql == "SELECT id, name FROM users LIMIT 1001"
    assert "star_columns_omitted" in result.codes
    assert (
        "users.email"
        in next(f for f in result.findings if f.code == "star_columns_omitted").message
    )
    assert refusal("SELECT * FROM orders", policy) is None
    only_email = SafetyPolicy(allowed_columns=("users.email",), denied_columns=("users.email",))
    assert refusal("SELECT * FROM users", only_email) == "select_star"
