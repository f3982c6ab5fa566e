"""Schema linking, one class of question at a time, each on a small schema of its own."""

import doctest
from pathlib import Path

import pytest

import agents.linking
import agents.linking.index
import agents.linking.synonyms
import agents.linking.terms
from agents.linking import (
    EvidenceWeights,
    SchemaIndex,
    Synonyms,
    identifier_terms,
    question_words,
    stem,
    words,
)
from agents.schema_explorer import ColumnInfo, ForeignKeyInfo, TableInfo


def table(
    name: str,
    *columns: str,
    fks: dict[str, str] | None = None,
    comment: str | None = None,
    comments: dict[str, str] | None = None,
    values: dict[str, list[str]] | None = None,
) -> TableInfo:
    return TableInfo(
        name=name,
        comment=comment,
        columns=[
            ColumnInfo(
                name=c,
                type="INTEGER" if c.endswith("_id") else "VARCHAR(40)",
                comment=(comments or {}).get(c),
                values=(values or {}).get(c, []),
            )
            for c in columns
        ],
        foreign_keys=[
            ForeignKeyInfo(columns=[c], referred_table=t, referred_columns=[c])
            for c, t in (fks or {}).items()
        ],
    )


def schema(*tables: TableInfo) -> dict[str, TableInfo]:
    return {t.name: t for t in tables}


def test_one_stemmer_for_questions_and_identifiers() -> None:
    assert stem("names") == stem("name") == "name"
    assert stem("countries") == stem("country")
    assert identifier_terms("Names") == identifier_terms("name") == ["name"]
    assert question_words("the names") == ["name"]


def test_a_plural_in_the_question_does_not_favour_a_table_named_in_the_plural() -> None:
    index = SchemaIndex(
        schema(
            table("first_names", "first_names_id", "popularity"),
            table("singer", "singer_id", "name", "country"),
        )
    )
    # "names" and "name" are one term: the singer table, which has both words asked, wins
    assert index.rank("What are the names of singers from France?")[0] == "singer"


def test_identifiers_are_split_at_underscores_case_changes_and_digits() -> None:
    assert words("supplierInvoice_no") == ["supplier", "invoice", "no"]
    assert words("HTMLParser2") == ["html", "parser", "2"]
    assert identifier_terms("CountryCode") == [stem("country"), stem("code")]


def test_compound_identifiers_are_split_into_their_words() -> None:
    assert identifier_terms("countrylanguage") == [
        stem("countrylanguage"),
        stem("country"),
        stem("language"),
    ]
    index = SchemaIndex(
        schema(
            table("countrylanguage", "countrycode", "language", "percentage"),
            table("city", "city_id", "population"),
        )
    )
    assert index.rank("Which language is spoken in most countries?") == ["countrylanguage"]
    assert index.rank("high school students", 1) == []  # nothing here is about schools
    schools = SchemaIndex(schema(table("Highschooler", "ID", "grade"), table("city", "city_id")))
    assert schools.rank("How many high schoolers are there?") == ["Highschooler"]


def test_column_comments_are_evidence() -> None:
    tables = schema(
        table("t_a17", "c1", "c2", comments={"c2": "ISO code of the customer's country"}),
        table("t_b22", "c1", "c2", comments={"c2": "weight of the parcel in kg"}),
    )
    assert SchemaIndex(tables).rank("customers by country") == ["t_a17"]
    commented = schema(table("t_c9", "c1", comment="parcel shipments"), table("t_d4", "c1"))
    assert SchemaIndex(commented).rank("shipments last week") == ["t_c9"]


def test_sampled_values_are_evidence() -> None:
    tables = schema(
        table("lang", "code", "label", values={"label": ["English", "Dutch", "French"]}),
        table("person", "person_id", "full_name", values={"full_name": ["Ada Lovelace"]}),
    )
    index = SchemaIndex(tables)
    assert index.rank("Who speaks English?") == ["lang"]
    assert index.rank("When was Lovelace born?") == ["person"]


def test_a_table_name_outweighs_a_sampled_value() -> None:
    tables = schema(
        table("genre", "genre_id", "title"),
        table("track", "track_id", "kind", values={"kind": ["genre film"]}),
    )
    assert SchemaIndex(tables).rank("genres")[0] == "genre"


def test_synonyms_bridge_the_question_and_the_schema_and_users_extend_them(
    tmp_path: Path,
) -> None:
    tables = schema(table("shop", "shop_id", "location"), table("nation", "nation_id", "code"))
    assert SchemaIndex(tables).rank("How many stores are there?") == []
    assert SchemaIndex(tables, synonyms=Synonyms({"store": ["shop"]})).rank(
        "How many stores are there?"
    ) == ["shop"]
    # both directions, multi-word, and from a file
    path = tmp_path / "words.toml"
    path.write_text('[synonyms]\ncountry = ["nation"]\n"retail outlet" = ["shop"]\n')
    loaded = Synonyms.load(path)
    index = SchemaIndex(tables, synonyms=loaded)
    assert index.rank("countries by code") == ["nation"]
    assert index.rank("each retail outlet") == ["shop"]
    assert len(loaded | Synonyms({"store": ["shop"]})) == 3


def test_a_synonym_counts_less_than_the_word_itself() -> None:
    tables = schema(table("vendor", "vendor_id"), table("supplier", "supplier_id"))
    index = SchemaIndex(tables, synonyms=Synonyms({"vendor": ["supplier"]}))
    assert index.rank("suppliers") == ["supplier", "vendor"]
    assert index.rank("vendors") == ["vendor", "supplier"]


def test_a_bad_synonyms_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[synonyms]\nstore = "shop"\n')
    with pytest.raises(ValueError, match="must map words to lists"):
        Synonyms.load(path)


def test_the_default_synonyms_reach_short_forms() -> None:
    index = SchemaIndex(schema(table("stock", "item_id", "qty"), table("other", "x_id")))
    assert index.rank("quantity in stock") == ["stock"]
    assert index.rank("quantity") == ["stock"]


def test_tables_joined_to_the_best_matches_beat_isolated_look_alikes() -> None:
    tables = schema(
        table("pets", "pet_id", "pet_type", "pet_age"),
        table("has_pet", "student_id", "pet_id", fks={"student_id": "student", "pet_id": "pets"}),
        table("student", "student_id", "last_name", "age"),
        table("student_archive", "archive_id", "last_name", "age"),
    )
    question = "Last name of the student who has a pet of age 3"
    ranked = SchemaIndex(tables).rank(question)
    assert ranked == ["student", "has_pet", "pets", "student_archive"]
    # without the coherence step the look-alike comes before the tables that join the best match
    flat = SchemaIndex(tables, weights=EvidenceWeights(coherence=0.0)).rank(question)
    assert flat.index("student_archive") < flat.index("has_pet")


def test_ties_are_broken_by_connectivity_not_by_name() -> None:
    tables = schema(
        table("a_event", "event_id", "venue"),
        table("z_event", "event_id", "venue", "ticket_id", fks={"ticket_id": "ticket"}),
        table("ticket", "ticket_id", "price"),
    )
    assert SchemaIndex(tables).rank("every event")[:2] == ["z_event", "a_event"]


def test_nothing_matching_means_nothing_ranked_and_hubs_by_connectivity() -> None:
    tables = schema(
        table("aardvark", "aardvark_id"),
        table("order_line", "line_id", "order_id", "item_id", fks={"order_id": "orders"}),
        table("orders", "order_id", "customer_id", fks={"customer_id": "customer"}),
        table("customer", "customer_id"),
    )
    index = SchemaIndex(tables)
    assert index.rank("What is the weather on Mars?") == []
    assert index.hubs(2) == ["orders", "order_line"]
    assert "aardvark" not in index.hubs(3)


def test_rank_limit_and_repeatability() -> None:
    tables = schema(table("film", "film_id", "title"), table("film_actor", "film_id", "actor_id"))
    index = SchemaIndex(tables)
    assert index.rank("films", 1) == ["film"]
    assert index.rank("films", 0) == []
    assert SchemaIndex(dict(tables)).scored("films") == index.scored("films")


def test_public_names_and_examples() -> None:
    for module in (agents.linking, agents.linking.index, agents.linking.synonyms):
        assert module.__all__ == sorted(module.__all__), module.__name__
    for module in (agents.linking.terms, agents.linking.synonyms, agents.linking.index):
        assert doctest.testmod(module).failed == 0, module.__name__
