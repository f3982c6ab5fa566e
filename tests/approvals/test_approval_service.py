"""The functions a reviewer's command line calls, over every store."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from approval_fakes import ManualClock, fake_validate, item
from rich.console import Console

from approvals import (
    ApprovalGate,
    BatchExpired,
    DecisionConflict,
    DecisionError,
    ExpirySweeper,
    MappingReviewer,
    TerminalReviewer,
    decide_batch,
    history,
    list_pending,
    reviewer_identity,
)


def test_reviewer_identity_is_the_login_name_whatever_the_environment_claims():
    import getpass

    assert reviewer_identity({"SQLGATE_REVIEWER": " carol "}) == getpass.getuser()
    assert reviewer_identity({}) not in ("", None)


def test_list_show_decide_history(store, tmp_path):
    run = ApprovalGate(None, fake_validate, store=store, context={"dialect": "sqlite"})
    a, b = item(question_id="q1"), item(question_id="q2")
    batch = run.open([a, b])
    other = run.open([item()])
    (first, second) = list_pending(store)
    assert (first.batch_id, first.pending, first.cycle) == (batch.batch_id, 2, 1)
    assert second.batch_id == other.batch_id
    assert store.get_batch(batch.batch_id).batch.context == {"dialect": "sqlite"}

    out = io.StringIO()
    TerminalReviewer(Console(file=out, width=120)).show(store.get_batch(batch.batch_id).batch)
    assert a.call_id in out.getvalue() and "question q2?" in out.getvalue()

    path = tmp_path / "decisions.json"
    path.write_text(
        json.dumps({"q1": "approve", "q2": {"action": "reject", "reason": "not this quarter"}})
    )
    outcome = decide_batch(
        store,
        batch.batch_id,
        MappingReviewer.from_json(path),
        fake_validate,
        actor="erin",
        idempotency_key="erin-1",
    )
    assert outcome.decided_by == "erin" and outcome.reasons() == {b.call_id: "not this quarter"}
    again = decide_batch(
        store,
        batch.batch_id,
        MappingReviewer.from_json(path),
        fake_validate,
        actor="erin",
        idempotency_key="erin-1",
    )
    assert again == outcome
    asked = []
    with pytest.raises(DecisionConflict):
        decide_batch(
            store, batch.batch_id, lambda b: asked.append(b) or {}, fake_validate, actor="frank"
        )
    assert asked == []
    assert [s.batch_id for s in list_pending(store)] == [other.batch_id]

    events = history(store, batch_id=batch.batch_id)
    assert [(e.event, e.actor) for e in events if e.call_id is None] == [
        ("batch_opened", "sqlgate"),
        ("vote_cast", "erin"),
        ("batch_resolved", "erin"),
    ]
    assert {e.batch_id for e in history(store, run_id=run.run_id)} == {
        batch.batch_id,
        other.batch_id,
    }


def test_decide_refuses_bad_and_expired_decisions(store):
    clock = ManualClock()
    run = ApprovalGate(None, fake_validate, store=store, clock=clock, ttl=timedelta(seconds=5))
    a = item()
    batch = run.open([a])
    with pytest.raises(DecisionError):
        decide_batch(
            store, batch.batch_id, MappingReviewer({}), fake_validate, actor="gina", clock=clock
        )
    clock.advance(5)
    ExpirySweeper(store, clock).sweep()
    with pytest.raises(BatchExpired):
        decide_batch(
            store,
            batch.batch_id,
            MappingReviewer({"q1": "approve"}),
            fake_validate,
            actor="gina",
            clock=clock,
        )
