"""A reviewed question's hint (``--hint``, MCP ``evidence``) teaches the tables' vocabulary as the
question does: a later question without the hint ranks the table only the hint named."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from agents.catalogue import build_catalogue, index_for
from approvals.migrations import migrate, state_engine
from orchestrator.core.database import TargetDatabase
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import MemorySettings, MemoryStore, ReviewMemory, scope_of
from orchestrator.features.memory.store import MIGRATIONS
from orchestrator.wiring import run_hooks
from safety import Policy

FIRST = "How many payouts were made last month?"
HINT = "a payout is a disbursement to a grower: a row of ledger_entries"
LATER = "Count the disbursements to growers in 2024"  # the hint's words, not the question's
SQL = "SELECT COUNT(entry_id) AS n FROM ledger_entries"
_KINDS = ["warehouse", "payroll", "vendor", "campaign", "ticket", "asset", "invoice", "badge"]
_PARTS = ["items", "runs", "logs", "notes", "events", "codes", "slots", "tags"]


@pytest.fixture
def large_db(tmp_path: Path) -> Iterator[TargetDatabase]:
    """64 tables the questions share no word with, and ``ledger_entries``."""
    path = tmp_path / "large.sqlite"
    with sqlite3.connect(path) as conn:
        for kind in _KINDS:
            for part in _PARTS:
                conn.execute(f"CREATE TABLE {kind}_{part} (id INTEGER PRIMARY KEY, label TEXT)")
        conn.execute(
            "CREATE TABLE ledger_entries (entry_id INTEGER PRIMARY KEY, amount REAL, posted DATE)"
        )
    database = TargetDatabase(f"sqlite:///{path}")
    yield database
    database.dispose()


@dataclass
class _Host:
    """What a hook reads of the pipeline that calls it (``HookHost``)."""

    db: TargetDatabase
    reviewer: object = None

    def run_policy(self, ctx: object) -> Policy:
        return self.db.policy


def _shown_for_later(database: TargetDatabase, state: StateDatabase, hint: str) -> list[str]:
    """Record FIRST (with ``hint``) as a reviewed pair, then rank the catalogue of LATER."""
    memory = ReviewMemory(MemoryStore(state.engine), MemorySettings())
    host = _Host(database)
    memory.record(
        scope_of(host), question=FIRST, sql=SQL, status="approved", reviewers=["rita"],
        hint=hint,
    )  # fmt: skip
    vocabulary = run_hooks(memory).vocabulary  # the hook every entry point wires
    assert vocabulary is not None
    tables = database.schema.tables()
    index = index_for(tables, usage=vocabulary(host))
    return build_catalogue([LATER], tables, index=index).shown


def test_a_hints_words_rank_its_table_for_a_later_question_without_it(
    large_db: TargetDatabase, state: StateDatabase
) -> None:
    assert "ledger_entries" in _shown_for_later(large_db, state, HINT)


def test_without_the_hint_the_later_question_does_not_find_the_table(
    large_db: TargetDatabase, state: StateDatabase
) -> None:
    assert "ledger_entries" not in _shown_for_later(large_db, state, "")


def test_pairs_recorded_before_hints_were_kept_read_as_having_none(state_url: str) -> None:
    engine = state_engine(state_url)
    migrate(engine, "memory", MIGRATIONS[:2])  # the schema of the previous release
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO sqlgate_memory_examples (database, dialect, question, clarifications, "
                "sql, kind, status, template_id, template_text, schema_fp, policy_fp, tables, "
                "reviewers, created_at) VALUES ('sqlite:///shop.db', 'sqlite', :q, '[]', :sql, "
                "'positive', 'approved', 't', 't', 's', 'p', '[\"ledger_entries\"]', '[\"rita\"]', "
                ":at)"
            ),
            {"q": FIRST, "sql": SQL, "at": datetime(2026, 1, 1, tzinfo=UTC)},
        )
    store = MemoryStore(engine)
    store.setup()
    [example] = store.examples()
    assert (example.question, example.hint) == (FIRST, "")
    engine.dispose()
