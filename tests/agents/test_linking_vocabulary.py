"""The classes of words a question and a schema do not share, each with its own test: derivational
suffixes, abbreviations, what comments teach, and what notes and reviewed questions said; and the
catalogue's budget, which follows the ranking's confidence."""

from __future__ import annotations

import doctest

import pytest

import agents.linking.derivation
import agents.linking.values
import agents.linking.vocabulary
from agents.catalogue import build_catalogue
from agents.linking import (
    SchemaIndex,
    Usage,
    abbreviates,
    learned_expansions,
    related,
    stem,
)
from agents.schema_explorer import ColumnInfo, ForeignKeyInfo, TableInfo

#: English words one derivational suffix from their base: agent nouns, -ment, -ure, -al, -ion
#: (as the stemmer leaves it), -y; none of them is in the product code.
DERIVED = [
    ("consumed", "consumption"),
    ("produced", "production"),
    ("reduce", "reduction"),
    ("assume", "assumption"),
    ("compete", "competition"),
    ("competitor", "competition"),
    ("compose", "composition"),
    ("employ", "employee"),
    ("employed", "employment"),
    ("invest", "investment"),
    ("invest", "investor"),
    ("depart", "departure"),
    ("fail", "failure"),
    ("sing", "singer"),
    ("teach", "teacher"),
    ("direct", "director"),
    ("visit", "visitor"),
    ("drive", "driver"),
    ("write", "writer"),
    ("ship", "shipment"),
    ("member", "membership"),
    ("music", "musician"),
    ("economy", "economic"),
    ("history", "historical"),
    ("arrive", "arrival"),
    ("approve", "approval"),
    ("manage", "manager"),
]
#: Words that merely begin alike: they must stay apart.
UNRELATED = [
    ("tour", "tournament"),
    ("count", "county"),
    ("count", "country"),
    ("plan", "planet"),
    ("part", "party"),
    ("state", "status"),
    ("station", "state"),
    ("formal", "former"),
    ("publish", "public"),
    ("order", "ordinal"),
    ("price", "prize"),
    ("court", "course"),
    ("plane", "plant"),
    ("even", "event"),
    ("star", "start"),
    ("sign", "signal"),
    ("port", "portal"),
    ("mark", "market"),
    ("car", "career"),
    ("gene", "general"),
]


@pytest.mark.parametrize(("a", "b"), DERIVED)
def test_words_one_derivational_suffix_apart_are_related(a: str, b: str) -> None:
    assert related(stem(a), stem(b)) and related(stem(b), stem(a))


@pytest.mark.parametrize(("a", "b"), UNRELATED)
def test_words_that_only_begin_alike_are_not(a: str, b: str) -> None:
    assert not related(stem(a), stem(b))


def table(name: str, *columns: str, comment: str | None = None, **comments: str) -> TableInfo:
    return TableInfo(
        name=name,
        comment=comment,
        columns=[ColumnInfo(name=c, type="TEXT", comment=comments.get(c)) for c in columns],
    )


def schema(*tables: TableInfo) -> dict[str, TableInfo]:
    return {t.name: t for t in tables}


def test_a_question_word_reaches_a_schema_word_through_a_derivation() -> None:
    index = SchemaIndex(
        schema(
            table("meter_reading", "meter_id", "consumed_kwh", "read_on"),
            table("tariff", "tariff_id", "price_per_kwh"),
        )
    )
    assert index.rank("Total electricity consumption per meter")[0] == "meter_reading"
    assert index.rank("Which singers sang most?") == []  # nothing derived from nothing


@pytest.mark.parametrize(
    ("short", "word", "expected"),
    [
        ("trans", "transactions", True),
        ("disp", "disposition", True),
        ("cust", "customer", True),
        ("qty", "quantity", True),
        ("mgr", "manager", True),
        ("amt", "amount", True),
        ("cat", "contract", False),  # has a vowel after its first letter: only a prefix counts
        ("tr", "transactions", False),  # too short
        ("trans", "trans", False),  # the same word
        ("ord", "ords", False),  # too close in length to be a short form
    ],
)
def test_short_forms(short: str, word: str, expected: bool) -> None:
    assert abbreviates(short, word) is expected


def test_abbreviated_identifiers_answer_to_the_words_they_shorten() -> None:
    index = SchemaIndex(
        schema(
            table("trans", "trans_id", "account_id", "amount"),
            table("disp", "disp_id", "client_id", "type"),
            table("district", "district_id", "a2", "a11"),
            table("useracct", "u_id", "name"),
        )
    )
    assert index.rank("How many transactions were there?")[0] == "trans"
    assert index.rank("List every disposition of a client")[0] == "disp"
    assert index.rank("How many users are there?")[0] == "useracct"


def test_comments_teach_what_an_abbreviation_means_everywhere_it_is_used() -> None:
    tables = schema(
        table("disp", "disp_id", "type", comment="dispositions of clients to accounts"),
        table("card", "card_id", "disp_id", "issued"),
        table("loan", "loan_id", "amount"),
    )
    assert learned_expansions(tables) == {"disp": ["disposit"]}
    index = SchemaIndex(tables)
    # card never says "disposition", but it uses the short word its comment spelled out
    ranked = index.rank("cards of each disposition")
    assert ranked[:2] == ["card", "disp"] or ranked[:2] == ["disp", "card"]
    assert "loan" not in ranked


def test_comments_on_abbreviated_columns_are_the_evidence() -> None:
    tables = schema(
        table(
            "district", "district_id", "a11", "a12", a11="average salary", a12="unemployment rate"
        ),
        table("account", "account_id", "frequency"),
    )
    assert SchemaIndex(tables).rank("districts with the highest average salary")[0] == "district"


def test_notes_and_reviewed_questions_teach_the_analysts_words() -> None:
    tables = schema(
        table("client", "client_id", "gender", "birth_date"),
        table("trans", "trans_id", "amount"),
        table("product", "product_id", "label"),
    )
    assert SchemaIndex(tables).rank("How many borrowers are there?") == []
    usage = Usage(
        {
            "client": ["Borrowers are the clients who took out a loan."],
            "TRANS": ["How many deals closed last month?"],  # matched without regard to case
        }
    )
    index = SchemaIndex(tables, usage=usage)
    assert index.rank("How many borrowers are there?") == ["client"]
    assert index.rank("biggest deals")[0] == "trans"
    assert len(usage) == 2 and usage.fingerprint() != Usage().fingerprint()


def _crowded(look_alikes: int) -> dict[str, TableInfo]:
    """One shop among many look-alike ``<db>_customers`` tables of other databases."""
    tables: dict[str, TableInfo] = {}
    for i in range(look_alikes):
        tables[f"db{i:03d}_customers"] = table(
            f"db{i:03d}_customers", "customer_id", "customer_name", f"extra_{i}", f"more_{i}"
        )
    tables["shop_orders"] = table("shop_orders", "order_id", "customer_id", "order_total")
    tables["shop_orders"].foreign_keys.append(
        ForeignKeyInfo(
            columns=["customer_id"],
            referred_table="db000_customers",
            referred_columns=["customer_id"],
        )
    )
    tables["glacier"] = table("glacier", "glacier_id", "area_km2", "retreat_m")
    return tables


def test_flat_scores_show_more_tables_with_fewer_details() -> None:
    tables = _crowded(80)
    flat = build_catalogue(["customer names"], tables)
    # eighty equal candidates: the best few with types, many more with column names, the rest named
    full = [
        n for n, line in zip(flat.shown, flat.text.splitlines(), strict=False) if " TEXT" in line
    ]
    assert 0 < len(full) <= 8
    assert len(flat.shown) > 20 and flat.named
    assert len(flat.shown) + len(flat.named) > 40
    clear = build_catalogue(["glacier retreat by area"], tables)
    assert clear.shown[0] == "glacier"
    assert clear.text.splitlines()[0] == tables["glacier"].catalogue_line()


def test_the_catalogue_stays_within_its_budget_on_a_thousand_tables() -> None:
    tables = _crowded(1000)
    whole = sum(len(t.catalogue_line()) + 1 for t in tables.values())
    for question in ("customer names", "orders per customer", "what is the meaning of life"):
        cat = build_catalogue([question], tables)
        assert len(cat.text) <= 6_000
        assert len(cat.text) < 0.12 * whole


def test_join_tables_between_the_best_tables_come_along() -> None:
    tables = schema(
        table("student", "student_id", "last_name", "age"),
        table("pets", "pet_id", "pet_type", "weight"),
        table("has_pet", "student_id", "pet_id"),
        *(table(f"other_{i:02d}", f"thing_{i}", "last_name", "weight") for i in range(45)),
    )
    tables["has_pet"].foreign_keys = [
        ForeignKeyInfo(
            columns=["student_id"], referred_table="student", referred_columns=["student_id"]
        ),
        ForeignKeyInfo(columns=["pet_id"], referred_table="pets", referred_columns=["pet_id"]),
    ]
    index = SchemaIndex(tables)
    assert index.bridges(["student", "pets"]) == ["has_pet"]
    cat = build_catalogue(
        ["last names of students and the weight of their pets"], tables, max_tables=3
    )
    assert cat.shown == ["student", "pets", "has_pet"] or set(cat.shown[:3]) == {
        "student",
        "pets",
        "has_pet",
    }


def test_examples_run() -> None:
    for module in (agents.linking.derivation, agents.linking.vocabulary, agents.linking.values):
        assert doctest.testmod(module).failed == 0, module.__name__
