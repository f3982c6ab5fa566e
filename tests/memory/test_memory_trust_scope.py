"""Trust keyed on what was actually reviewed: the run's policy, review events (batches), proven
reviewers; approvals given unseen (``--yes``, an MCP client's answer) never earn anything.

Cassettes recorded from the scripted server (tests/scripted_llm); re-record with
``pytest tests/memory/test_memory_trust_scope.py --record-mode=rewrite``.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from approvals import ApprovalGate, ApprovalItem, SqlApprovalStore
from approvals.policy import EarnedApprovalRule
from orchestrator.core.database import TargetDatabase
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.pipeline import Pipeline
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import (
    MemoryScope,
    MemorySettings,
    MemoryStore,
    ReviewMemory,
    memory_for,
    scope_of,
)
from orchestrator.features.memory.review_memory import MemoryEvidence
from orchestrator.interfaces.cli.main import app
from orchestrator.interfaces.reviewer_identity import cli_reviewer
from orchestrator.wiring import run_hooks
from safety import Policy
from tests.conftest import reviewer_env
from tests.memory.conftest import POLICY, SHOP
from tests.memory.test_memory_pipeline import SCENARIOS, SHIPPED, SHIPPED_AGAIN, Reviewer
from tests.orchestrator.conftest import SCRIPTED_MODEL, Harness
from tests.scripted_llm.scenarios import ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer

SQL = "SELECT COUNT(order_id) AS n FROM orders WHERE status = 'open'"
ROLE_POLICY = Policy.from_toml_text(
    "[auto_approval]\nenabled = true\nmin_approvals = 2\nmin_reviewers = 1\nmax_age_days = 30\n"
    "[roles.analyst]\nmax_limit = 10\n"
)


@pytest.fixture
def harness() -> Iterator[Harness]:
    """The scripted server of the memory scenarios (it answers only while recording)."""
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        yield Harness((server.base_url, SCRIPTED_MODEL))


def _item(sql: str = SQL) -> ApprovalItem:
    return ApprovalItem.new(question_id="q1", question="How many orders are open?", sql=sql)


class TestTrustKeyedOnWhatWasReviewed:
    @pytest.mark.vcr
    def test_a_template_earned_under_a_role_is_not_auto_approved_for_a_base_policy_run(
        self, harness: Harness, demo_url: str, state: StateDatabase
    ) -> None:
        person = Reviewer()
        memory = memory_for(state, ROLE_POLICY)
        database = TargetDatabase(demo_url, policy=ROLE_POLICY)
        pipeline = Pipeline(database, harness.llm(), person, hooks=run_hooks(memory))

        for _ in range(2):  # two reviews, two batches, under the analyst's narrower policy
            assert pipeline.ask(SHIPPED, role="analyst").approvals[0].status == "approved"
        assert person.asked == 2

        base = pipeline.ask(SHIPPED_AGAIN)  # the base policy: LIMIT up to 1000, never reviewed
        assert base.approvals[0].status == "approved" and person.asked == 3

        earned = pipeline.ask(SHIPPED_AGAIN, role="analyst")  # where it was earned, it holds
        assert earned.approvals[0].status == "auto_approved" and person.asked == 3

    def test_a_quorum_of_two_on_two_statements_of_one_batch_is_one_review_event(
        self, store: MemoryStore
    ) -> None:
        rule = EarnedApprovalRule(enabled=True, min_approvals=2, min_reviewers=2)
        memory = ReviewMemory(store, MemorySettings(auto_approval=rule))
        scope = MemoryScope.of("sqlite:///shop.db", "sqlite", SHOP, POLICY)
        for call in ("c1", "c2"):  # one batch, two statements of one template, two votes
            memory.record(
                scope,
                question="How many orders are open?",
                sql=SQL.replace("'open'", f"'{call}'"),
                status="approved",
                reviewers=["alice", "bob"],
                call_id=call,
                batch_id="batch_1",
            )
        gate = memory.auto_approval(scope)
        assert gate is not None and gate(_item()) is None

        memory.record(
            scope,
            question="How many orders are open?",
            sql=SQL,
            status="approved",
            reviewers=["alice"],
            call_id="c3",
            batch_id="batch_2",
        )
        reason = gate(_item())
        assert reason is not None and "approved 2 time(s) by alice, bob" in reason

    @pytest.mark.vcr
    def test_approvals_given_unseen_or_at_a_client_earn_nothing_a_reviewers_do(
        self, harness: Harness, demo_url: str, state: StateDatabase
    ) -> None:
        pipeline = Pipeline(
            TargetDatabase(demo_url),
            harness.llm(),
            None,
            approval_store=state.approvals,
            run_store=state.runs,
            hooks=run_hooks(memory_for(state, ROLE_POLICY)),
        )
        # `batch --distributed --yes` submits "unseen"; an MCP elicitation "at_client"
        for review, reviewer in (("unseen", "root"), ("at_client", "ann"), ("reviewed", "alice")):
            paused = pipeline.ask(SHIPPED)
            [record] = state.approvals.pending_batches()
            gate = ApprovalGate(
                reviewer=None, validate=pipeline.validator().validate, store=state.approvals
            )
            gate.submit(
                record.batch_id,
                {c: "approve" for c in record.batch.pending_ids},
                actor=reviewer,
                review=review,
            )
            [done] = pipeline.resume(paused.run_id)
            assert done.status == "answered"
        at_client, reviewed = state.memory.examples()[::-1]
        assert at_client.reviewers == [] and reviewed.reviewers == ["alice"]  # --yes: nothing
        evidence = MemoryEvidence(state.memory, scope_of(pipeline))
        found = evidence.approvals(reviewed.template_id, reviewed.created_at - timedelta(days=1))
        assert [e.reviewers for e in found] == [frozenset({"alice"})]


class TestDistributedYesApprovesUnseen:
    def test_the_vote_of_batch_distributed_yes_is_unseen_and_teaches_nothing(
        self, tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from approvals import ApproveAll
        from orchestrator.interfaces.cli.batch_distributed import _Follower

        monkeypatch.delenv("SQLGATE_REVIEWER", raising=False)
        state = StateDatabase(f"sqlite:///{tmp_path / 'state.sqlite'}")
        state.setup()
        gate = ApprovalGate(None, lambda sql: _Accepted(sql), store=state.approvals, run_id="run_d")
        record = state.approvals.get_batch(gate.open([_item()]).batch_id)

        # the command's own decision step, as `--yes` takes it (the run is handed to the broker)
        follower = _Follower(
            state,
            redis_url,
            ApproveAll(),
            write=lambda result: None,
            written=set(),
            requeue_s=60.0,
            patience_s=5.0,
        )
        follower._decide(record)

        [vote] = state.approvals.get_batch(record.batch_id).votes
        assert (vote.review, vote.actor) == ("unseen", getpass.getuser())


class TestTheCommandLineReviewerIsProven:
    def test_the_login_name_by_default_and_a_claimed_name_alone_is_refused(self) -> None:
        me = getpass.getuser()
        assert cli_reviewer({}) == me
        assert cli_reviewer({"SQLGATE_REVIEWER": me}) == me
        with pytest.raises(ConfigurationError, match="must be proven"):
            cli_reviewer({"SQLGATE_REVIEWER": "mallory-" + me})

    def test_a_reviewer_token_proves_its_actor(self) -> None:
        env = reviewer_env("rita")
        assert cli_reviewer(env) == "rita"
        assert cli_reviewer({**env, "SQLGATE_REVIEWER": "rita"}) == "rita"
        with pytest.raises(ConfigurationError, match="must be proven"):
            cli_reviewer({**env, "SQLGATE_REVIEWER": "carol"})
        with pytest.raises(ConfigurationError, match="may not decide"):
            cli_reviewer(reviewer_env("ann", role="analyst"))
        with pytest.raises(ConfigurationError, match="not a usable reviewer token"):
            cli_reviewer({**env, "SQLGATE_REVIEWER_TOKEN": "guessed"})

    def test_an_in_process_terminal_review_is_recorded_under_the_proven_name(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from approvals import ApproveAll, TerminalReviewer
        from orchestrator.interfaces.cli.common import reviewer_actor

        monkeypatch.delenv("SQLGATE_REVIEWER", raising=False)
        monkeypatch.delenv("SQLGATE_REVIEWER_TOKEN", raising=False)
        assert reviewer_actor(TerminalReviewer()) == getpass.getuser()
        for name, value in reviewer_env("rita").items():
            monkeypatch.setenv(name, value)
        assert reviewer_actor(TerminalReviewer()) == "rita"
        assert reviewer_actor(ApproveAll()) == "reviewer"  # --yes decides unseen, as nobody

    def test_approvals_decide_refuses_a_claimed_name_and_decides_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        url = f"sqlite:///{tmp_path / 'state.sqlite'}"
        monkeypatch.setenv("SQLGATE_STATE_URL", url)
        monkeypatch.setenv("SQLGATE_REVIEWER", "mallory-" + getpass.getuser())
        store = SqlApprovalStore(url)
        store.setup()
        batch = ApprovalGate(None, lambda sql: _Accepted(sql), store=store).open([_item()])
        decisions = tmp_path / "d.json"
        decisions.write_text(json.dumps({c: "approve" for c in batch.pending_ids}))

        result = CliRunner().invoke(
            app, ["approvals", "decide", batch.batch_id, "--file", str(decisions), "--json"]
        )

        assert result.exit_code == 2, result.output
        assert "must be proven" in json.loads(result.stdout)["error"]["message"]
        assert store.get_batch(batch.batch_id).status == "pending"


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql: Any = sql
