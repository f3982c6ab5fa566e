"""Retrieval filters by database before it ranks: a database whose URL extends this one's never
crowds this one's approved examples out of the prompt (SQLite and PostgreSQL state)."""

from __future__ import annotations

import pytest

from orchestrator.features.memory import MemoryScope, MemorySettings, MemoryStore, ReviewMemory
from tests.memory.conftest import POLICY, SHOP

SQL = "SELECT COUNT(order_id) AS n FROM orders WHERE status = 'open'"
BY_CUSTOMER = "SELECT customer_id, COUNT(order_id) AS n FROM orders WHERE status = 'open' GROUP BY customer_id"


class TestRetrievalFiltersByDatabaseFirst:
    @pytest.mark.parametrize(
        ("ours", "theirs"),
        [
            ("sqlite:///data/shop.db", "sqlite:///data/shop.db.bak"),
            ("postgresql://analyst@db/sales", "postgresql://analyst@db/sales_archive"),
        ],
    )
    def test_this_databases_examples_are_never_crowded_out(
        self, store: MemoryStore, ours: str, theirs: str
    ) -> None:
        memory = ReviewMemory(store, MemorySettings(examples_per_question=3, candidates=3))
        mine, other = (MemoryScope.of(url, "sqlite", SHOP, POLICY) for url in (ours, theirs))
        kept = [
            memory.record(mine, question=q, sql=sql, status="approved", reviewers=["alice"])
            for q, sql in (
                ("How many orders are open?", SQL),
                ("Open orders per customer", BY_CUSTOMER),
            )
        ]
        for n in range(60):  # closer matches, more of them, all on the other database
            memory.record(
                other,
                question=f"How many open orders are open orders open today {n}?",
                sql=SQL,
                status="approved",
                reviewers=["bob"],
            )

        found = memory.examples_for(mine, "How many open orders are open?")

        assert sorted(e.id for e in found) == sorted(e.id for e in kept)
        assert {e.database for e in found} == {ours}
        assert {e.database for e in memory.examples_for(other, "How many open orders?")} == {theirs}
