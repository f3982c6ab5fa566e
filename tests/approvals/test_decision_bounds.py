"""A decision naming thousands of unknown call ids is refused after one look-up of them all, with
a message of bounded length (every problem is still in the error's ``problems``)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from approval_fakes import StepClock, fake_validate, item

from approvals import (
    ApprovalBatch,
    ApprovalGate,
    Approve,
    CallLocation,
    DecisionError,
    ItemCategory,
)

UNKNOWN = 10_000


def _batch(*items, run_id: str = "run_a", cycle: int = 1) -> ApprovalBatch:
    return ApprovalBatch(
        batch_id=f"batch_{uuid.uuid4().hex}",
        run_id=run_id,
        cycle=cycle,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        items=list(items),
        categories={i.call_id: ItemCategory.NEEDS_APPROVAL for i in items},
    )


def test_locate_calls_finds_every_issued_id_among_many(store):
    a, b = item(), item(question_id="q2")
    first, other = _batch(a, cycle=2), _batch(b, run_id="run_b")
    store.create_batch(first)
    store.create_batch(other)
    wanted = [a.call_id, b.call_id, *(f"call_none_{n}" for n in range(2000)), a.call_id]

    assert store.locate_calls(wanted) == {
        a.call_id: CallLocation(first.batch_id, "run_a", 2),
        b.call_id: CallLocation(other.batch_id, "run_b", 1),
    }
    assert store.locate_calls([]) == {}


def test_ten_thousand_unknown_ids_are_refused_in_one_query_with_a_bounded_message(store, backend):
    pending = item()
    batch = _batch(pending)
    store.create_batch(batch)
    gate = ApprovalGate(None, fake_validate, store=store, clock=StepClock())
    decisions = {pending.call_id: Approve()}
    decisions.update({f"call_{uuid.uuid4().hex}": Approve() for _ in range(UNKNOWN)})
    statements: list[str] = []
    engine = getattr(store, "engine", None)
    if engine is not None:
        sa.event.listen(
            engine,
            "before_cursor_execute",
            lambda *a: statements.append(a[2]),  # noqa: ARG005
        )

    started = time.monotonic()
    try:
        gate.submit(batch.batch_id, decisions, actor="rita")
    except DecisionError as exc:
        refused = exc
    else:
        raise AssertionError("the decision was accepted")
    took = time.monotonic() - started

    assert len(refused.problems) == UNKNOWN
    assert {p.code for p in refused.problems} == {"unknown_call_id"}
    message = str(refused)
    assert len(message) < 1000 and f"and {UNKNOWN - 5} more (unknown_call_id)" in message
    if engine is not None:  # the database stores: one query on the issued call ids
        looked_up = [s for s in statements if "sqlgate_approval_calls" in s]
        assert len(looked_up) == 1, looked_up
    assert took < 30, took  # one query, not ten thousand
    assert store.get_batch(batch.batch_id).status == "pending"  # nothing was accepted
