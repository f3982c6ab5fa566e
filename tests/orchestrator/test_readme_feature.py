"""The README's worked example of a feature ("Adding a feature: a cost estimate before review")
runs as written: its module plugs into a pipeline with the one line the README shows, and the
reviewer is shown the planner's estimate with each statement."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from approvals import ApprovalBatch, ApprovalItem, Approve, ApproveAll
from orchestrator.core.hooks import RunHooks
from orchestrator.core.result import RunStatus
from orchestrator.wiring import run_hooks
from tests.conftest import ROOT
from tests.orchestrator.conftest import Harness, interactions
from tests.scripted_llm import scenarios as sc

README = ROOT / "README.md"
WIRING = ROOT / "orchestrator" / "wiring.py"


def _section() -> str:
    text = README.read_text()
    start = text.index("### Adding a feature")
    return text[start : text.index("\n## ", start)]


def _cost_hooks() -> Callable[[], RunHooks]:
    """The README's feature module, run as a module of its own."""
    module, _line = re.findall(r"```python\n(.*?)```", _section(), re.S)
    namespace: dict[str, object] = {"__name__": "orchestrator.features.cost"}
    exec(compile(module, "orchestrator/features/cost.py", "exec"), namespace)
    made = namespace["cost_hooks"]
    assert callable(made)
    return made  # type: ignore[return-value]


class ShownItems:
    """Approves everything, keeping the statements it was shown."""

    def __init__(self) -> None:
        self.shown: list[ApprovalItem] = []

    def __call__(self, batch: ApprovalBatch) -> dict[str, Approve]:
        self.shown += list(batch.items)
        return ApproveAll()(batch)


def test_the_registration_line_is_the_wiring_s_own() -> None:
    _module, line = re.findall(r"```python\n(.*?)```", _section(), re.S)
    wired = line.strip().removesuffix(" | cost_hooks()")
    assert wired != line.strip() and wired in WIRING.read_text()


@pytest.mark.vcr
def test_the_reviewer_is_shown_the_planner_s_estimate(harness: Harness, demo_url: str, vcr) -> None:
    reviewer = ShownItems()
    hooks = run_hooks() | _cost_hooks()()
    result = harness.pipeline(demo_url, reviewer, hooks=hooks).ask(sc.TOP_CATEGORIES)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 3 == interactions(vcr)  # no model call of its own
    [item] = reviewer.shown
    [cost] = [f for f in item.findings if f.code == "cost_estimate"]
    assert cost.severity == "warning" and not cost.message.startswith("no estimate")
