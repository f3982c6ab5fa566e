"""The memory store on SQLite and PostgreSQL state: recording, full-text retrieval, negatives,
edited preferred, token budget, notes, removal and export."""

from __future__ import annotations

import pytest

from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import (
    MemoryNotFound,
    MemoryScope,
    MemorySettings,
    MemoryStore,
    ReviewMemory,
    approx_tokens,
)

TOP = "Which customers placed the most orders in 2024?"
TOP_SQL = (
    "SELECT c.name, COUNT(o.order_id) AS n FROM customers AS c JOIN orders AS o "
    "ON o.customer_id = c.customer_id WHERE o.order_date >= '2024-01-01' "
    "GROUP BY c.name ORDER BY n DESC LIMIT 5"
)
OPEN = "How many orders are still open?"
OPEN_SQL = "SELECT COUNT(order_id) AS n FROM orders WHERE status = 'open'"


def test_memory_is_a_component_of_the_state_database(state: StateDatabase) -> None:
    assert state.versions()["memory"] == 3
    StateDatabase(state.url).setup()  # again, from another object: nothing to do
    assert state.versions()["memory"] == 3


def test_a_paraphrase_finds_the_approved_pair(store: MemoryStore, scope: MemoryScope) -> None:
    memory = ReviewMemory(store)
    memory.record(scope, question=TOP, sql=TOP_SQL, status="approved", reviewers=["alice"])
    memory.record(scope, question=OPEN, sql=OPEN_SQL, status="approved", reviewers=["alice"])

    found = memory.examples_for(scope, "Top customers by number of orders placed in 2025")

    assert [e.sql for e in found][0] == TOP_SQL
    assert found[0].template_id == memory.template(TOP_SQL.replace("2024", "2025"), "sqlite")


def test_examples_stay_with_their_database(store: MemoryStore, scope: MemoryScope) -> None:
    memory = ReviewMemory(store)
    other = MemoryScope.of("postgresql://host/other", "postgres", {"orders": []}, {})
    memory.record(other, question=TOP, sql=TOP_SQL, status="approved", reviewers=["alice"])
    assert memory.examples_for(scope, TOP) == []


def test_a_rejected_pair_is_never_a_positive_example(
    store: MemoryStore, scope: MemoryScope
) -> None:
    memory = ReviewMemory(store)
    approved = memory.record(scope, question=TOP, sql=TOP_SQL, status="approved", reviewers=["a"])
    bad_sql = TOP_SQL.replace("LIMIT 5", "LIMIT 50")  # same template, rejected later
    negative = memory.record(
        scope, question=TOP, sql=bad_sql, status="rejected", reviewers=["b"], reason="wrong year"
    )
    assert negative.kind == "negative" and negative.reason == "wrong year"

    found = memory.examples_for(scope, TOP)
    assert found == []  # the rejection shadows the earlier approval of the same template
    assert store.search_examples(scope.database, TOP, 10) == []

    again = memory.record(scope, question=TOP, sql=TOP_SQL, status="edited", reviewers=["c"])
    assert [e.id for e in memory.examples_for(scope, TOP)] == [again.id]
    assert approved.id not in [e.id for e in memory.examples_for(scope, TOP)]


def test_edited_examples_are_preferred(store: MemoryStore, scope: MemoryScope) -> None:
    memory = ReviewMemory(store, MemorySettings(examples_per_question=1))
    memory.record(scope, question=OPEN, sql=OPEN_SQL, status="approved", reviewers=["a"])
    edited_sql = "SELECT COUNT(order_id) AS open_orders FROM orders WHERE status IN ('open', 'new')"
    memory.record(scope, question=OPEN, sql=edited_sql, status="edited", reviewers=["b"])

    assert [e.sql for e in memory.examples_for(scope, OPEN)] == [edited_sql]


def test_examples_fit_the_token_budget(store: MemoryStore, scope: MemoryScope) -> None:
    long_sql = (
        "SELECT " + ", ".join(f"o.order_id + {n} AS c{n}" for n in range(60)) + " FROM orders AS o"
    )
    budget = approx_tokens(f"{OPEN}\n{OPEN_SQL}") + 5
    memory = ReviewMemory(store, MemorySettings(examples_per_question=5, example_tokens=budget))
    memory.record(
        scope, question=OPEN + " (all columns)", sql=long_sql, status="edited", reviewers=["a"]
    )
    memory.record(scope, question=OPEN, sql=OPEN_SQL, status="approved", reviewers=["a"])

    found = memory.examples_for(scope, OPEN)

    assert [e.sql for e in found] == [OPEN_SQL]
    assert sum(approx_tokens(f"{e.question}\n{e.sql}") for e in found) <= budget


def test_notes_match_by_words_and_tables(store: MemoryStore, scope: MemoryScope) -> None:
    memory = ReviewMemory(store)
    revenue = store.add_note(
        "Revenue means sum of quantity × unit_price × (1 − discount) over non-cancelled orders",
        author="alice",
        tables=["orders", "order_items"],
    )
    store.add_note(
        "Churned customers have no order in 12 months", author="bob", database="elsewhere"
    )

    assert [n.id for n in memory.notes_for(scope, "What was the revenue per month?")] == [
        revenue.id
    ]
    assert memory.notes_for(scope, "Which customers churned?") == []  # another database's note
    assert memory.notes_for(scope, "How tall is Everest?") == []


def test_list_show_remove_export(store: MemoryStore, scope: MemoryScope) -> None:
    memory = ReviewMemory(store)
    first = memory.record(scope, question=TOP, sql=TOP_SQL, status="approved", reviewers=["a"])
    memory.record(
        scope, question=OPEN, sql=OPEN_SQL, status="rejected", reviewers=["b"], reason="no"
    )
    store.add_note("Open means not shipped", author="a", tables=["orders"])

    assert [e.question for e in store.examples(kind="positive")] == [TOP]
    assert [e.question for e in store.examples(kind="negative")] == [OPEN]
    assert store.example(first.id).columns is not None
    exported = list(store.export())
    assert [r["type"] for r in exported] == ["example", "example", "note"]

    store.remove_example(first.id)
    with pytest.raises(MemoryNotFound):
        store.example(first.id)
    with pytest.raises(MemoryNotFound):
        store.remove_example(first.id)
    assert memory.examples_for(scope, TOP) == []  # the full-text index forgot it too
