"""The terminal reviewer, driven by scripted input without a TTY."""

from __future__ import annotations

import io

import pytest
from approval_fakes import fake_validate, item
from rich.console import Console

from approvals import (
    ApprovalCancelled,
    ApprovalGate,
    Approve,
    AutoApprovePolicy,
    Edit,
    Reject,
    TerminalReviewer,
)


class Script:
    """Answers in order; then behaves like end of input (or raises what it is given)."""

    def __init__(self, *answers: str, then: type[BaseException] = EOFError) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.then = then

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise self.then()
        return self.answers.pop(0)


def reviewer(*answers: str, validate=None, then=EOFError):
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    script = Script(*answers, then=then)
    return TerminalReviewer(console, input=script, validate=validate), script, out


def ask(question_id: str = "q1"):
    """An item the test policy does not auto-approve."""
    return item("SELECT id FROM orders LIMIT 5", question_id=question_id)


def review(items, terminal):
    return ApprovalGate(
        terminal, fake_validate, policy=AutoApprovePolicy(allowed_tables={"regions"})
    ).review(items)


def test_shows_every_pending_item_once_then_asks_per_item():
    terminal, script, out = reviewer(
        "a", "r", "", "numbers look wrong", "e", "SELECT id", "FROM orders", ""
    )
    a = item("SELECT id FROM customers LIMIT 5", question_id="q1")
    r = item("SELECT id FROM products LIMIT 5", question_id="q2")
    e = item("SELECT * FROM orders LIMIT 5", question_id="q3")
    denied = item("DELETE FROM orders", question_id="q4")
    auto = item("SELECT name FROM regions LIMIT 2", question_id="q5")
    outcome = review([a, r, e, denied, auto], terminal)
    text = out.getvalue()

    for pending in (a, r, e):
        assert text.count(pending.call_id) == 1  # the panel; prompts go through input()
        assert pending.sql in text
        assert f"question {pending.question_id}?" in text
    assert "3 statement(s) need approval" in text
    assert "DENIED, not approvable" in text and "dml_in_tree: DELETE is not allowed" in text
    assert f"auto-approved {auto.call_id}" in text
    assert "A rejection needs a reason." in text
    assert [p.split(" ")[0] for p in script.prompts if p.startswith("call_")] == [
        a.call_id,
        r.call_id,
        e.call_id,
    ]

    assert outcome.resolutions[a.call_id].status == "approved"
    assert outcome.resolutions[r.call_id].reason == "numbers look wrong"
    assert outcome.runnable(e.call_id) == "SELECT id\nFROM orders LIMIT 100"
    assert outcome.resolutions[denied.call_id].status == "denied"
    assert outcome.resolutions[auto.call_id].status == "auto_approved"


def test_findings_are_shown():
    terminal, _, out = reviewer("a")
    review([item("SELECT id FROM orders")], terminal)
    assert "[rewrite] limit_added: LIMIT 100 added" in out.getvalue()


def test_returns_a_decision_per_pending_item():
    terminal, _, _ = reviewer("y", "n", "bad", "edit", "SELECT 2", "")
    a, b, c = item(), item(), item()
    decided = {}

    def recording(batch):
        decided.update(terminal(batch))
        return decided

    outcome = ApprovalGate(recording, fake_validate).review([a, b, c])
    assert decided == {
        a.call_id: Approve(),
        b.call_id: Reject(reason="bad"),
        c.call_id: Edit(sql="SELECT 2"),
    }
    assert outcome.runnable(c.call_id) == "SELECT 2 LIMIT 100"


def test_approve_all_remaining():
    terminal, script, _ = reviewer("r", "no", "A")
    a, b, c = ask(), ask(), ask()
    outcome = review([a, b, c], terminal)
    assert [r.status for r in outcome.resolutions.values()] == ["rejected", "approved", "approved"]
    assert len([p for p in script.prompts if p.startswith("call_")]) == 2


def test_unknown_answers_are_asked_again():
    terminal, _, out = reviewer("maybe", "a")
    outcome = review([ask()], terminal)
    assert "Please answer a, r, e or A." in out.getvalue()
    assert list(outcome.resolutions.values())[0].status == "approved"


def test_refused_edit_is_shown_and_the_item_asked_again():
    terminal, _, out = reviewer(
        "e", "DELETE FROM orders", "", "e", "", "e", "SELECT 3", "", validate=fake_validate
    )
    a = ask()
    outcome = review([a], terminal)
    text = out.getvalue()
    assert "Edited SQL refused: dml_in_tree: DELETE is not allowed" in text
    assert "No SQL entered" in text
    assert "What will run after validation:" in text and "SELECT 3 LIMIT 100" in text
    assert outcome.runnable(a.call_id) == "SELECT 3 LIMIT 100"


@pytest.mark.parametrize("then", [EOFError, KeyboardInterrupt])
def test_ctrl_c_or_end_of_input_cancels_everything(then):
    terminal, _, out = reviewer("a", then=then)
    gate = ApprovalGate(terminal, fake_validate)
    with pytest.raises(ApprovalCancelled) as err:
        gate.review([item(), item()])
    assert err.value.code == "approval_cancelled"
    assert "nothing runs" in out.getvalue()
    (pending,) = gate.store.pending_batches()
    assert pending.outcome is None


def test_cancel_while_typing_a_reason():
    terminal, _, _ = reviewer("r")
    with pytest.raises(ApprovalCancelled):
        review([ask()], terminal)
