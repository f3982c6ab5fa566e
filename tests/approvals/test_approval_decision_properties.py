"""Property: a decision is accepted exactly when it covers the pending set once, and a refused
decision changes nothing."""

from __future__ import annotations

from approval_fakes import fake_validate, item
from hypothesis import event, given, settings
from hypothesis import strategies as st

from approvals import ApprovalGate, Approve, DecisionError, Edit, Reject

decisions = st.sampled_from(
    [Approve(), Reject(reason="no"), Edit(sql="SELECT 7"), Edit(sql="DELETE FROM t")]
)


@settings(max_examples=150, deadline=None)
@given(
    n_pending=st.integers(min_value=1, max_value=4),
    picks=st.lists(st.tuples(st.integers(min_value=0, max_value=6), decisions), max_size=8),
    cover=st.booleans(),
)
def test_only_an_exact_valid_cover_is_accepted(n_pending, picks, cover):
    gate = ApprovalGate(None, fake_validate)
    earlier = gate.open([item()])
    gate.submit(earlier.batch_id, {earlier.pending_ids[0]: Approve()})
    pending = [item() for _ in range(n_pending)]
    denied = item("DROP TABLE t")
    batch = gate.open([*pending, denied])
    # index -> call_id: pending items, then the denied one, an earlier cycle's one, an unknown one
    ids = [*batch.pending_ids, denied.call_id, earlier.pending_ids[0], "call_unknown"]
    pairs = [(ids[i % len(ids)], d) for i, d in picks]
    if cover:  # start from an exact cover, in any order, then maybe spoil it with the picks
        order = sorted(batch.pending_ids, key=lambda cid: hash((cid, len(picks))))
        pairs = [
            (cid, d)
            for cid, (_, d) in zip(order, picks + [(0, Approve())] * n_pending, strict=False)
        ] + pairs[n_pending:]
    before = (gate.store.list_batches(), gate.store.audit_log())

    chosen = [cid for cid, _ in pairs]
    exact = sorted(chosen) == sorted(batch.pending_ids)
    valid_edits = all(not (isinstance(d, Edit) and "DELETE" in d.sql) for _, d in pairs)
    try:
        outcome = gate.submit(batch.batch_id, pairs)
    except DecisionError as err:
        event("refused")
        assert not (exact and valid_edits)
        assert (gate.store.list_batches(), gate.store.audit_log()) == before
        assert {p.code for p in err.problems} <= {
            "duplicate_call_id",
            "unknown_call_id",
            "stale_call_id",
            "not_pending_call_id",
            "missing_call_id",
            "invalid_edit",
        }
        return
    event("accepted")
    assert exact and valid_edits
    decided = dict(pairs)
    for call_id in batch.pending_ids:
        resolution = outcome.resolutions[call_id]
        expected = {"approve": "approved", "reject": "rejected", "edit": "edited"}[
            decided[call_id].action
        ]
        assert resolution.status == expected
        if expected == "edited":
            assert outcome.runnable(call_id) == "SELECT 7 LIMIT 100"
    assert outcome.resolutions[denied.call_id].status == "denied"
