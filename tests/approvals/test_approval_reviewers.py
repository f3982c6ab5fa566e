"""Reviewer strategies for scripts: approve all, reject all, decisions from a dict or JSON file."""

from __future__ import annotations

import json

import pytest
from approval_fakes import fake_validate, item

from approvals import (
    ApprovalGate,
    Approve,
    ApproveAll,
    DecisionError,
    Edit,
    MappingReviewer,
    Reject,
    RejectAll,
)


def test_approve_all_and_reject_all_cover_exactly_the_pending_set():
    a, d = item(), item("DELETE FROM t")
    outcome = ApprovalGate(ApproveAll(), fake_validate).review([a, d])
    assert {c: r.status for c, r in outcome.resolutions.items()} == {
        a.call_id: "approved",
        d.call_id: "denied",
    }
    outcome = ApprovalGate(RejectAll("frozen"), fake_validate).review([item()])
    assert [r.reason for r in outcome.resolutions.values()] == ["frozen"]


def test_mapping_by_call_id_question_id_and_default():
    a, b, c = item(question_id="q1"), item(question_id="q2"), item(question_id="q2")
    d = item(question_id="q3")
    reviewer = MappingReviewer(
        {
            a.call_id: {"action": "edit", "sql": "SELECT 1 LIMIT 1"},
            "q2": {"action": "reject", "reason": "no"},
        },
        default="approve",
    )
    outcome = ApprovalGate(reviewer, fake_validate).review([a, b, c, d])
    assert [r.status for r in outcome.resolutions.values()] == [
        "edited",
        "rejected",
        "rejected",
        "approved",
    ]


def test_mapping_without_default_leaves_items_missing():
    a, b = item(question_id="q1"), item(question_id="q2")
    with pytest.raises(DecisionError) as err:
        ApprovalGate(MappingReviewer({"q1": "approve"}), fake_validate).review([a, b])
    assert (err.value.code, err.value.call_ids) == ("missing_call_id", (b.call_id,))


def test_mapping_keys_that_match_nothing_are_refused_not_ignored():
    a = item()
    with pytest.raises(DecisionError) as err:
        ApprovalGate(
            MappingReviewer({a.call_id: "approve", "call_typo": "approve"}), fake_validate
        ).review([a])
    assert (err.value.code, err.value.call_ids) == ("unknown_call_id", ("call_typo",))


def test_from_json_file_and_text(tmp_path):
    a, b = item(question_id="q1"), item(question_id="q2")
    path = tmp_path / "decisions.json"
    path.write_text(
        json.dumps(
            {
                "decisions": {"q1": {"action": "reject", "reason": "stale data"}},
                "default": "approve",
            }
        )
    )
    assert MappingReviewer.from_json(path).decisions == {"q1": Reject(reason="stale data")}
    assert MappingReviewer.from_json(str(path)).default == Approve()
    reviewer = MappingReviewer.from_json(
        '{"q1": "approve", "q2": {"action": "edit", "sql": "SELECT 2"}}'
    )
    outcome = ApprovalGate(reviewer, fake_validate).review([a, b])
    assert outcome.runnable(b.call_id) == "SELECT 2 LIMIT 100"
    assert reviewer.decisions["q2"] == Edit(sql="SELECT 2")


def test_from_json_refuses_repeated_keys():
    with pytest.raises(DecisionError) as err:
        MappingReviewer.from_json(
            '{"call_a": "approve", "call_a": {"action": "reject", "reason": "x"}}'
        )
    assert (err.value.code, err.value.call_ids) == ("duplicate_call_id", ("call_a",))
    with pytest.raises(DecisionError) as err:
        MappingReviewer.from_json('{"decisions": {"q1": "approve", "q1": "approve"}}')
    assert err.value.code == "duplicate_call_id"


@pytest.mark.parametrize("content", ["null", "3", '["approve"]', '"approve"', "{"])
def test_from_json_refuses_a_file_that_is_not_an_object(tmp_path, content):
    path = tmp_path / "decisions.json"
    path.write_text(content)
    with pytest.raises(DecisionError) as err:
        MappingReviewer.from_json(path)
    assert err.value.code == "invalid_decision_file"


def test_invalid_decisions_in_a_mapping_are_refused_up_front():
    with pytest.raises(DecisionError) as err:
        MappingReviewer({"q1": "reject", "q2": "approve"}, default={"action": "nope"})
    assert err.value.code == "invalid_decision"
    assert err.value.call_ids == ("q1", "default")
