"""One sqlglot schema per database read, shared by every statement's risk: building it costs as
much as the schema is large, so it is never rebuilt per statement or per run."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from approvals import ApprovalItem
from orchestrator.core.database import TargetDatabase
from orchestrator.features.risk import RiskAssessor, assessor_for, column_resolver
from safety import DatabaseSchema, Policy, ReadOnlySettings, open_readonly_engine

SENSITIVE = Policy.from_toml_text('[risk]\nsensitive_columns = ["customers.email"]\n')


def _shop(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT)")
        conn.exec_driver_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER)")
    engine.dispose()
    return url


def _item(sql: str) -> ApprovalItem:
    return ApprovalItem.new(question_id="q", question="?", sql=sql)


def test_every_assessor_of_a_database_resolves_through_one_schema(tmp_path: Path) -> None:
    db = TargetDatabase(_shop(tmp_path), policy=SENSITIVE)
    try:
        shared = column_resolver(db)
        assert shared is column_resolver(db)
        first, second = assessor_for(db), assessor_for(db, SENSITIVE)
        assert first._resolver is shared and second._resolver is shared  # type: ignore[attr-defined]
        risk = first(_item("SELECT c.email FROM customers AS c JOIN orders AS o ON o.id = c.id"))
        assert risk.sensitive_columns == ["customers.email"]
        db.resolved_schema(refresh=True)  # a new read of the schema: a new resolver
        assert column_resolver(db) is not shared
    finally:
        db.dispose()


def test_a_schema_sqlglot_refuses_resolves_no_column_and_stays_closed(tmp_path: Path) -> None:
    engine = open_readonly_engine(_shop(tmp_path), ReadOnlySettings(statement_timeout_s=5))
    try:
        refused = DatabaseSchema(
            tables={"main.customers": ["id", "email"], "main.empty": []}, default_schema="main"
        )
        risk = RiskAssessor(engine, "sqlite", SENSITIVE, refused)(_item("SELECT * FROM customers"))
        assert risk.sensitive_columns == ["(columns not resolved)"]
        assert risk.level == "high"
    finally:
        engine.dispose()
