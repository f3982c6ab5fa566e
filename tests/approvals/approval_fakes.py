"""Fakes at the boundary of the gate (a small validator, clocks) and the store backends under test."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from approvals import ApprovalItem, ApprovalStore, MemoryApprovalStore, SqlApprovalStore


@dataclass
class FakeFinding:
    code: str
    message: str
    severity: str = "warning"
    node: str | None = None


@dataclass
class FakeResult:
    ok: bool
    sql: str | None
    findings: list[Any] = field(default_factory=list)

    @property
    def refusal(self) -> FakeFinding | None:
        return next((f for f in self.findings if f.severity == "error"), None)


def fake_validate(sql: str) -> FakeResult:
    """Refuses DELETE/DROP anywhere; adds ``LIMIT 100`` when no LIMIT is written."""
    upper = sql.upper()
    for word in ("DELETE", "DROP"):
        if word in upper:
            return FakeResult(
                False,
                None,
                [FakeFinding("dml_in_tree", f"{word} is not allowed", "error", word.title())],
            )
    text = sql.strip().rstrip(";")
    if "LIMIT" not in upper:
        return FakeResult(
            True, f"{text} LIMIT 100", [FakeFinding("limit_added", "LIMIT 100 added", "rewrite")]
        )
    return FakeResult(True, text)


class Calls:
    """A reviewer wrapper counting calls and keeping the batches it saw."""

    def __init__(self, reviewer):
        self.reviewer = reviewer
        self.batches = []

    def __call__(self, batch):
        self.batches.append(batch)
        return self.reviewer(batch)


class StepClock:
    """A clock that moves one second per reading."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def item(
    sql: str = "SELECT name FROM regions LIMIT 5", question_id: str = "q1", **kw: Any
) -> ApprovalItem:
    return ApprovalItem.new(
        question_id=question_id, question=f"question {question_id}?", sql=sql, **kw
    )


@dataclass
class Backend:
    kind: str
    url: str | None = None
    schema: str | None = None
    memory: MemoryApprovalStore | None = None
    opened: list[ApprovalStore] = field(default_factory=list)

    def open(self, **store_options: Any) -> ApprovalStore:
        """A store on the same state; ``store_options`` go to ``SqlApprovalStore``."""
        if self.kind == "memory":
            assert not store_options, "the memory store takes no options"
            return self.memory
        if self.schema:
            engine = sa.create_engine(
                self.url, connect_args={"options": f"-csearch_path={self.schema}"}
            )
            store = SqlApprovalStore(engine, **store_options)
        else:
            store = SqlApprovalStore(self.url, **store_options)
        store.setup()
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
