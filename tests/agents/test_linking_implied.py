"""What a question implies without saying it: a time, a route, an irregular English form, the
adjective a measure is asked with. Each reaches the tables that store it, below a word said."""

from __future__ import annotations

import pytest

from agents.linking import SchemaIndex
from agents.linking.derivation import related
from agents.linking.terms import route_words, stem, time_words
from tests.agents.test_linking import schema, table

# A small travel schema beside look-alikes: only the question's implications tell them apart.
TRAVEL = schema(
    table("city", "city_code", "city_name", values={"city_name": ["DENVER", "BOSTON"]}),
    table("airport", "airport_code", "city_code", fks={"city_code": "city"}),
    table(
        "flight",
        "flight_id",
        "from_airport",
        "to_airport",
        "departure_time",
        fks={"from_airport": "airport", "to_airport": "airport"},
    ),
    table("date_day", "month_number", "day_number", "year", "day_name"),
    table("hotel", "hotel_id", "city_code", "stars", fks={"city_code": "city"}),
    table("museum", "museum_id", "city_code", "opened", fks={"city_code": "city"}),
)


@pytest.mark.parametrize(
    ("question", "implied"),
    [
        ("flights on 6 5", ["date", "day", "month"]),
        ("flights on 12 31 1991", ["date", "day", "month", "year"]),
        ("who won in 2010", ["date", "year"]),
        ("trains leaving tomorrow", ["date", "day"]),
        ("shows on Saturdays", ["date", "day"]),
        ("hires in September", ["date", "month"]),
        ("hires in may 2001", ["date", "month", "year"]),
        ("early in the morning", ["time"]),
        ("flights on the 28", ["date", "day"]),
        ("leaving on 27", ["date", "day"]),
        ("flights on the 28th", ["date", "day"]),
        ("on 3rd may", ["date", "day", "month"]),
    ],
)
def test_a_time_the_question_names_implies_the_date_words(
    question: str, implied: list[str]
) -> None:
    assert time_words(question) == implied


@pytest.mark.parametrize(
    "question",
    [
        "students who may apply",  # "may" the verb, not the month
        "a march on the capital",
        "how many students are older than 20",  # one number is no date
        "rooms 5 to 40",  # 40 is no day of a month
        "the 12500 largest orders",  # no year
        "the 3 largest orders",  # a number of things, not a day
        "on 45 tables",
        "list everything",
    ],
)
def test_no_time_is_implied_where_none_is_named(question: str) -> None:
    assert time_words(question) == []


def test_a_route_is_from_somewhere_to_somewhere() -> None:
    assert "from" in route_words("flights from Denver to Boston")
    assert "destination" in route_words("trips between Denver and Boston")
    assert route_words("students aged from 18 to 20") == []
    assert route_words("names of the students from each city") == []
    assert route_words("between 10 and 20 rooms") == []


def test_irregular_forms_meet_their_base() -> None:
    assert stem("flew") == stem("flown") == stem("fly")
    assert stem("sold") == stem("sell") and stem("bought") == stem("buy")
    for noun, base in [
        ("flight", "fly"),
        ("sale", "sell"),
        ("length", "long"),
        ("height", "high"),
        ("death", "die"),
        ("choice", "choose"),
    ]:
        assert related(stem(noun), stem(base)), (noun, base)
    assert not related(stem("flight"), stem("light"))


def test_a_date_in_the_question_reaches_the_date_table() -> None:
    index = SchemaIndex(TRAVEL)
    ranked = index.rank("flights from DENVER to BOSTON on 6 5")
    assert "date_day" in ranked[:4]
    assert "date_day" not in index.rank("flights from DENVER to BOSTON")


def test_fly_reaches_flight_and_a_route_its_from_and_to_columns() -> None:
    index = SchemaIndex(TRAVEL)
    assert index.rank("i would like to fly to BOSTON")[0] == "flight"
    # no word names a flight: the route does, through its from_/to_ columns
    ranked = index.rank("from DENVER to BOSTON")
    assert ranked.index("flight") < ranked.index("hotel")
    assert ranked.index("flight") < ranked.index("museum")


def test_an_implied_word_counts_less_than_the_word_said() -> None:
    tables = schema(table("day_log", "entry"), table("shift", "start_time", "day"))
    index = SchemaIndex(tables)
    said = dict(index.scored("the day"))
    implied = dict(index.scored("tomorrow"))
    assert implied["shift"] < said["shift"]


def test_the_adjective_a_measure_is_asked_with_reaches_it() -> None:
    tables = schema(
        table("people", "person_id", "name", "age"),
        table("buildings", "building_id", "name", "height"),
        table("products", "product_id", "name", "price"),
    )
    index = SchemaIndex(tables)
    assert index.rank("who is the oldest")[0] == "people"
    assert index.rank("the tallest one")[0] == "buildings"
    assert index.rank("the cheapest one")[0] == "products"


def test_a_two_letter_value_counts_only_where_written_as_a_code() -> None:
    from agents.linking import ValueIndex

    values = ValueIndex.from_values({("airline", "airline_code"): ["UA", "DL", "HP"]})
    assert [m.value for m in values.matches("what does UA stand for")] == ["UA"]
    assert [m.value for m in values.matches("flights on HP")] == ["HP"]
    assert values.matches("engines over 300 hp") == []
    assert values.matches("ua flights") == []
