"""The TOML policy file: parsing, one clear error per malformed key, roles that only narrow."""

import json

import pytest

from safety import Policy, PolicyError, SafetyPolicy, SqlValidator, load_policy

EXAMPLE = """
select_star = "refuse"
max_limit = 200
row_cap = 500
statement_timeout = 5

[tables]
allow = ["users", "orders", "crm.users"]
deny = ["audit"]

[columns]
deny = ["users.email", "crm.users.phone"]

[roles.analyst]
tables.allow = ["orders"]
max_limit = 50

[roles.support]
columns.deny = ["orders.total"]
statement_timeout = 2.5
"""


def test_example_file_loads(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(EXAMPLE)
    policy = load_policy(path)
    assert policy.tables.allow == ("users", "orders", "crm.users")
    assert policy.columns.deny == ("users.email", "crm.users.phone")
    assert (policy.max_limit, policy.row_cap, policy.statement_timeout) == (200, 500, 5.0)
    safety_policy = policy.safety_policy()
    assert isinstance(safety_policy, SafetyPolicy)
    assert safety_policy.star == "reject" and safety_policy.max_limit == 200


def test_defaults_expand_star():
    policy = Policy.from_toml_text("")
    assert policy.select_star == "expand"
    assert policy.safety_policy().star == "expand"
    assert SafetyPolicy().star == "expand"
    assert SafetyPolicy(star="refuse").star == "reject"


def test_roles_narrow_and_never_widen():
    policy = Policy.from_toml_text(EXAMPLE)
    analyst = policy.for_role("analyst")
    assert analyst.tables.allow == ("orders",)
    assert analyst.tables.deny == ("audit",)
    assert analyst.max_limit == 50 and analyst.statement_timeout == 5.0
    support = policy.for_role("support")
    assert support.columns.deny == ("users.email", "crm.users.phone", "orders.total")
    assert support.statement_timeout == 2.5 and support.max_limit == 200
    assert policy.for_role(None) is policy
    with pytest.raises(PolicyError) as error:
        policy.for_role("nobody")
    assert error.value.key == "roles.nobody"


def test_role_cannot_widen_the_base():
    with pytest.raises(PolicyError) as error:
        Policy.from_toml_text(
            '[tables]\nallow = ["orders"]\n[roles.analyst]\ntables.allow = ["orders", "users"]'
        )
    assert error.value.key == "roles.analyst.tables.allow" and "users" in str(error.value)
    with pytest.raises(PolicyError, match="select_star"):
        Policy.from_toml_text('select_star = "refuse"\n[roles.a]\nselect_star = "expand"')
    # A lower limit is a narrowing; a higher one is simply not taken.
    assert (
        Policy.from_toml_text("max_limit = 10\n[roles.a]\nmax_limit = 99").for_role("a").max_limit
        == 10
    )


def test_role_policy_refuses_what_the_base_allows():
    policy = Policy.from_toml_text(EXAMPLE)
    schema = {"users": ["id", "name", "email"], "orders": ["id", "total"], "audit": ["id"]}
    base = SqlValidator("postgres", policy.safety_policy(), schema=schema)
    analyst = SqlValidator("postgres", policy.for_role("analyst").safety_policy(), schema=schema)
    assert base.validate("SELECT name FROM users").ok
    assert analyst.validate("SELECT name FROM users").refusal.code == "table_not_allowed"
    # PostgreSQL: the statement also carries the result budget's row check (safety.value_bound)
    assert "(SELECT total FROM orders LIMIT 51) AS sqlgate_rows" in (
        analyst.validate("SELECT total FROM orders").sql or ""
    )


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("max_limt = 5", "max_limt"),
        ('max_limit = "5"', "max_limit"),
        ("max_limit = 0", "max_limit"),
        ('select_star = "maybe"', "select_star"),
        ('[tables]\nallow = ["a.b.c"]', "tables.allow"),
        ('[columns]\ndeny = ["a.b.c.d"]', "columns.deny"),
        ('[columns]\ndeny = [""]', "columns.deny"),
        ("[tables]\nallow = 3", "tables.allow"),
        ('[tables]\nalow = ["x"]', "tables.alow"),
        ("statement_timeout = -1", "statement_timeout"),
        ("[roles.a]\nmax_limit = true", "roles.a.max_limit"),
        ("[roles.a]\nwhatever = 1", "roles.a.whatever"),
        ('[auto_approval]\nenabled = "yes"', "auto_approval.enabled"),
        ("[auto_approval]\nmin_approvals = 0", "auto_approval.min_approvals"),
        ("[auto_approval]\nmin_reviewers = 1.5", "auto_approval.min_reviewers"),
        ("[auto_approval]\nmax_age_days = 0", "auto_approval.max_age_days"),
        ("[auto_approval]\nmin_aprovals = 2", "auto_approval.min_aprovals"),
        ("auto_approval = true", "auto_approval"),
    ],
)
def test_malformed_file_is_one_error_naming_the_key(text, key):
    with pytest.raises(PolicyError) as error:
        Policy.from_toml_text(text)
    assert error.value.code == "invalid_policy"
    assert error.value.key is not None and error.value.key.startswith(key), error.value
    assert key in str(error.value)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(PolicyError, match="not valid TOML"):
        Policy.from_toml_text("max_limit = ")
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "absent.toml")


def test_fingerprint_and_round_trip():
    policy = Policy.from_toml_text(EXAMPLE)
    stored = json.loads(json.dumps(policy.model_dump(mode="json")))
    again = Policy.from_data(stored)
    assert again == policy
    assert again.fingerprint() == policy.fingerprint()
    assert len(policy.fingerprint()) == 64
    # Any change of meaning changes the fingerprint.
    assert Policy.from_toml_text(
        EXAMPLE.replace("max_limit = 200", "max_limit = 201")
    ).fingerprint() != (policy.fingerprint())
    assert policy.for_role("analyst").fingerprint() != policy.fingerprint()


def test_safety_policy_rejects_bad_entries():
    with pytest.raises(ValueError):
        SafetyPolicy(denied_columns=("a.b.c.d",))
    with pytest.raises(ValueError):
        SafetyPolicy(allowed_tables=("a.b.c",))


def test_auto_approval_is_off_unless_the_file_says_so():
    assert Policy().auto_approval.enabled is False
    policy = Policy.from_toml_text(
        "[auto_approval]\nenabled = true\nmin_approvals = 2\nmin_reviewers = 1\nmax_age_days = 7"
    )
    rules = policy.auto_approval
    assert (rules.enabled, rules.min_approvals, rules.min_reviewers, rules.max_age_days) == (
        True,
        2,
        1,
        7.0,
    )
    assert policy.for_role(None).auto_approval == rules
    assert Policy.model_validate(policy.model_dump()).fingerprint() == policy.fingerprint()
    assert policy.fingerprint() != Policy().fingerprint()
