"""``memory_for``: the one function every entry point gets its memory from; ``SQLGATE_MEMORY``
turns it off (or keeps it out of prompts), and the policy file's ``[auto_approval]`` feeds the
gate's rule."""

from __future__ import annotations

import pytest

from approvals import EarnedApprovalRule
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import memory_for
from safety import AutoApprovalRules, Policy

ON = Policy.from_toml_text(
    "[auto_approval]\nenabled = true\nmin_approvals = 2\nmin_reviewers = 2\nmax_age_days = 14"
)


class Opened:
    """A target database opened with a policy file carries it as ``.policy``."""

    policy = ON


def test_on_by_default_with_retrieval_and_no_auto_approval(state: StateDatabase) -> None:
    memory = memory_for(state, environ={})
    assert memory is not None and memory.store.engine is state.engine
    assert memory.settings.examples_per_question > 0 and memory.settings.notes_per_question > 0
    assert memory.settings.auto_approval.enabled is False


@pytest.mark.parametrize("source", [ON, Opened()], ids=["policy", "object with .policy"])
def test_the_policy_files_auto_approval_section_feeds_the_gate(
    state: StateDatabase, source: object
) -> None:
    memory = memory_for(state, source, environ={})
    assert memory is not None
    assert memory.settings.auto_approval == EarnedApprovalRule(
        enabled=True, min_approvals=2, min_reviewers=2, max_age_days=14
    )


def test_off_and_record_only(state: StateDatabase) -> None:
    assert memory_for(state, ON, environ={"SQLGATE_MEMORY": "off"}) is None
    recording = memory_for(state, ON, environ={"SQLGATE_MEMORY": "record"})
    assert recording is not None
    assert recording.settings.examples_per_question == 0
    assert recording.settings.notes_per_question == 0
    assert recording.settings.auto_approval.enabled  # the gate's rule is the policy's


def test_an_unknown_mode_is_one_clear_error(state: StateDatabase) -> None:
    with pytest.raises(ConfigurationError, match="SQLGATE_MEMORY='maybe' is not one of on"):
        memory_for(state, environ={"SQLGATE_MEMORY": "maybe"})


def test_the_policy_section_and_the_gates_rule_agree_on_defaults() -> None:
    assert AutoApprovalRules().model_dump() == EarnedApprovalRule().model_dump()
    assert set(AutoApprovalRules.model_fields) == set(EarnedApprovalRule.model_fields)
