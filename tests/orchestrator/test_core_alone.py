"""The core runs with no feature: a pipeline given no hooks answers a question end to end, and
so does one built in an interpreter where no feature module (nor the composition root) can be
imported at all.

Without the risk feature the gate still knows every statement's level: ``unassessed`` gives the
policy's fallback (its ``sensitive`` level when the policy names sensitive columns, which cannot
be ruled out), so a policy's rule of more reviewers is never lost with the feature.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from approvals import ApprovalBatch, ApprovalItem, Approve, ApproveAll
from orchestrator.core.hooks import RunHooks
from orchestrator.core.result import RunStatus
from orchestrator.core.run_gate import NOT_ASSESSED, unassessed
from safety import Policy
from tests.conftest import ROOT
from tests.orchestrator.conftest import CASSETTES, SCRIPTED_MODEL, Harness, interactions
from tests.scripted_llm import scenarios as sc

CASSETTE = CASSETTES / "test_core_alone" / "test_a_pipeline_with_no_feature_answers.yaml"


class ShownItems:
    """Approves everything, keeping the statements it was shown."""

    def __init__(self) -> None:
        self.shown: list[ApprovalItem] = []

    def __call__(self, batch: ApprovalBatch) -> dict[str, Approve]:
        self.shown += list(batch.items)
        return ApproveAll()(batch)


@pytest.mark.vcr
def test_a_pipeline_with_no_feature_answers(harness: Harness, demo_url: str, vcr) -> None:
    reviewer = ShownItems()
    pipeline = harness.pipeline(demo_url, reviewer, hooks=RunHooks())

    result = pipeline.ask(sc.TOP_CATEGORIES)

    assert result.status == RunStatus.ANSWERED, result.error
    assert result.llm_calls == 3 == interactions(vcr)
    assert result.row_count == 5 and result.answer
    # no risk feature: the policy's fallback level, saying why
    [item] = reviewer.shown
    assert item.risk is not None and item.risk.reasons == [NOT_ASSESSED]
    assert item.risk.level == Policy().risk.no_estimate


def test_without_the_risk_feature_sensitive_columns_keep_their_reviewers() -> None:
    policy = Policy.from_toml_text('[risk]\nsensitive_columns = ["customers.email"]\n')
    item = ApprovalItem.new(question_id="q1", question="?", sql="SELECT id FROM orders")
    assert unassessed(policy)(item).level == "high"
    assert unassessed(Policy())(item).level == "medium"


#: Runs in a fresh interpreter whose first meta-path finder refuses every feature module and
#: the composition root, as if they were not installed; prints the result as JSON.
_BARE = """
import sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("orchestrator.features", "orchestrator.wiring")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())

import httpx2

from approvals import ApproveAll
from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.replay import CassetteTransport
from orchestrator.core.result import RunStatus
from ratelimit import SlidingWindowLimiter

cassette, db, model, question = sys.argv[1:5]
transport = CassetteTransport([cassette])
llm = LLMClient(
    LLMSettings(model=model, base_url="http://replay.invalid/v1"),
    limiter=SlidingWindowLimiter(limit=5, window=60.0),
    http_client=httpx2.Client(transport=transport),
)
result = Pipeline(TargetDatabase(db), llm, ApproveAll()).ask(question)
transport.assert_all_played()
loaded = sorted(m for m in sys.modules if m.startswith(("orchestrator.features", "orchestrator.wiring")))
print(json.dumps({"status": RunStatus(result.status).value, "rows": result.row_count, "loaded": loaded}))
"""


def test_the_core_answers_with_no_feature_installed(demo_db: Path, tmp_path: Path) -> None:
    assert CASSETTE.exists(), CASSETTE
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json\n" + _BARE,
            str(CASSETTE),
            f"sqlite:///{demo_db}",
            SCRIPTED_MODEL,
            sc.TOP_CATEGORIES,
        ],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-replay"},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"status": "answered", "rows": 5, "loaded": []}


def test_a_feature_module_is_refused_in_that_interpreter(tmp_path: Path) -> None:
    """The finder above does refuse the features: the check can fail."""
    probe = _BARE.split("import httpx2")[0] + "import orchestrator.features.memory\n"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0 and "orchestrator.features" in done.stderr
