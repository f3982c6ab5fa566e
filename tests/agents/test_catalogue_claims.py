"""The catalogue's closing line: every statement about the tables left out is true."""

from __future__ import annotations

import doctest
import random
import sys
from pathlib import Path

import pytest

import agents.linking.claims
from agents.catalogue import UNLISTED_RULE, build_catalogue
from agents.linking import SchemaIndex
from agents.linking.claims import check_closing, closing_facts, closing_line
from agents.schema_explorer import ColumnInfo, ForeignKeyInfo, TableInfo

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT / ".." / "shared" / "corpora"


def table(name: str, *columns: str, fks: dict[str, str] | None = None) -> TableInfo:
    return TableInfo(
        name=name,
        columns=[ColumnInfo(name=c, type="INTEGER") for c in columns],
        foreign_keys=[
            ForeignKeyInfo(columns=[c], referred_table=t, referred_columns=[c])
            for c, t in (fks or {}).items()
        ],
    )


def filler(count: int) -> dict[str, TableInfo]:
    """Tables no question here is about, with words of their own."""
    return {
        f"zz{i}_ledger": table(f"zz{i}_ledger", f"zz{i}_ledger_id", "quux_total")
        for i in range(count)
    }


def test_doctests() -> None:
    assert doctest.testmod(agents.linking.claims).failed == 0


def test_a_left_out_neighbour_or_word_is_never_denied() -> None:
    tables = filler(50)
    tables["match"] = table("match", "match_id", "country_id", fks={"country_id": "country"})
    tables["country"] = table("country", "country_id", "label")
    tables["score_board"] = table("score_board", "score_board_id", "winner")
    question = ["Which matches had a winner?"]
    facts = closing_facts(question, tables, ["match"], [])
    assert facts.joining == 1  # country joins match and is left out
    assert facts.matching == 1 and facts.matched == ("winner",)
    line = closing_line(facts)
    assert "none shares a foreign key" not in line
    assert "1 of them share a foreign key" in line and "'winner'" in line
    assert check_closing(line, question, tables, ["match"], []) == []
    # the old unconditional sentence is caught as false
    old = UNLISTED_RULE.format(count=facts.unlisted)
    assert check_closing(old, question, tables, ["match"], [])
    # a wrong count is caught too
    assert check_closing(line.replace("1 of them share", "2 of them share"), question, tables,
                         ["match"], [])  # fmt: skip


def test_words_nothing_has_are_said_never_nothing_else_matches() -> None:
    tables = filler(50)
    tables["hero"] = table("hero", "hero_id", "hero_name", "str")
    question = ["How strong is the Hulk?"]
    facts = closing_facts(question, tables, ["hero"], [])
    assert facts.unknown == ("strong", "hulk")
    line = closing_line(facts)
    assert "matches the question's words" not in line
    assert "'strong', 'hulk'" in line
    assert check_closing(line, question, tables, ["hero"], []) == []
    assert check_closing(UNLISTED_RULE.format(count=facts.unlisted), question, tables, ["hero"],
                         [])  # fmt: skip


def test_built_catalogues_name_the_shown_tables_neighbours() -> None:
    tables = filler(60)
    tables["match"] = table("match", "match_id", "venue_id", fks={"venue_id": "venue"})
    tables["venue"] = table("venue", "venue_id", "capacity")
    cat = build_catalogue(["How many matches were played?"], tables)
    assert "match" in cat.shown
    assert "venue" in cat.shown or "venue" in cat.named
    assert check_closing(cat.text, ["How many matches were played?"], tables, cat.shown,
                         cat.named) == []  # fmt: skip


def test_a_lone_short_form_does_not_collapse_the_catalogue() -> None:
    tables = filler(60)
    tables["hero_stats"] = table("hero_stats", "hero_stats_id", "str", "dex")
    tables["city_weather"] = table("city_weather", "city_weather_id", "mar", "apr")
    index = SchemaIndex(tables)
    assert index.rank("How strong is the Hulk?") == []  # str is nobody's short form here
    assert index.rank("Who was born in San Marino?") == []
    cat = build_catalogue(["How strong is the Hulk?"], tables, index=index)
    assert cat.unlisted == 0 or "'strong'" in cat.text


def _spider():  # noqa: ANN202
    if not (CORPORA / "spider_train" / "train_spider.json").exists():
        pytest.skip(f"corpus {CORPORA / 'spider_train'} is absent (see its README.md)")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _linking_corpora import spider

    return spider("train")


def test_closing_line_true_on_merged_spider_schema() -> None:
    """Every catalogue built for a seeded sample of Spider train questions over the 166 Spider
    schemas merged into one (about 875 tables) is checked; at least 99 % must be true."""
    corpus = _spider()
    tables = corpus.tables
    assert len(tables) > 800
    index = SchemaIndex(tables)
    cases = random.Random(32).sample(corpus.cases, 600)
    false: list[tuple[str, list[str]]] = []
    for case in cases:
        cat = build_catalogue([case.question], tables, index=index)
        problems = check_closing(
            cat.text, [case.question], tables, cat.shown, cat.named, postings=index.word_postings
        )
        if problems:
            false.append((case.question, problems))
    # batches of questions too, as ``sqlgate batch`` builds them
    for start in range(0, 100, 10):
        questions = [c.question for c in cases[start : start + 10]]
        cat = build_catalogue(questions, tables, index=index)
        problems = check_closing(cat.text, questions, tables, cat.shown, cat.named)
        if problems:
            false.append((" | ".join(questions), problems))
    assert len(false) <= 0.01 * (len(cases) + 10), false[:5]


def test_only_weak_short_forms_bring_a_map_of_the_schema() -> None:
    tables = {
        f"part{i}_ledger": table(f"part{i}_ledger", f"part{i}_ledger_id", "quux_total")
        for i in range(150)
    }
    # ``cust`` is a naming pattern here (two identifiers), so "customers" may reach it, weakly
    tables["sale"] = table("sale", "sale_id", "cust_code", "cust_region")
    index = SchemaIndex(tables)
    assert not index.confident("Which customers bought from Roni?")
    assert index.rank("Which customers bought from Roni?")[:1] == ["sale"]
    cat = build_catalogue(["Which customers bought from Roni?"], tables, index=index)
    assert "sale" in cat.shown
    # not three tables and a claim that nothing else matches: the map of the schema comes along
    assert len(cat.named) >= 10
    assert "'customers'" in cat.text and "'roni'" in cat.text
    assert check_closing(cat.text, ["Which customers bought from Roni?"], tables, cat.shown,
                         cat.named) == []  # fmt: skip


def test_a_spelled_short_form_stands_only_for_its_own_words() -> None:
    tables = filler(50)
    tables["apartment"] = table("apartment", "apt_id", "apt_number")
    tables["booking"] = table("booking", "booking_id", "apt_id", fks={"apt_id": "apartment"})
    index = SchemaIndex(tables)
    assert index.rank("List apartments in alphabetical order")[:2] == ["apartment", "booking"]
    assert index.rank("Which bookings are alphabetical?")[:1] == ["booking"]
    assert "apartment" not in index.rank("alphabetical listing please")
