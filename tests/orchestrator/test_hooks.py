"""``RunHooks``: two features' hooks add up (``a | b``) without either knowing the other."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.core.hooks import RunHooks


def test_reports_run_both_and_lists_per_question_merge() -> None:
    calls: list[str] = []
    first = RunHooks(
        notes=lambda host, qs: {"q1": ["orders are net of refunds"]},
        after_execution=lambda host, ctx, ran, gate: calls.append("first"),
    )
    second = RunHooks(
        notes=lambda host, qs: {"q1": ["a client is a borrower"], "q2": ["x"]},
        after_execution=lambda host, ctx, ran, gate: calls.append("second"),
        answered=lambda text: "settled",
    )
    both = first | second
    host: Any = None

    assert both.notes is not None and both.notes(host, []) == {
        "q1": ["orders are net of refunds", "a client is a borrower"],
        "q2": ["x"],
    }
    assert both.after_execution is not None
    both.after_execution(host, None, [], None)  # type: ignore[arg-type]
    assert calls == ["first", "second"]
    assert both.answered is second.answered and both.examples is None


def test_a_hook_that_answers_one_question_is_set_by_one_feature_only() -> None:
    a = RunHooks(assess=lambda db, policy: lambda item: None)
    with pytest.raises(ValueError, match="'assess'"):
        a | RunHooks(assess=lambda db, policy: lambda item: None)
    assert (a | RunHooks()).assess is a.assess
    assert (RunHooks() | a).assess is a.assess
