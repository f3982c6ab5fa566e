"""The MCP package's public surface, its argument refusal and its error codes."""

from __future__ import annotations

import doctest
from typing import Any

import pytest

from orchestrator.interfaces import mcp as sqlgate_mcp
from orchestrator.interfaces.mcp import errors, template_tools, tools
from orchestrator.interfaces.mcp.errors import ToolRefusal, refuse_arguments


def test_all_is_sorted_and_importable() -> None:
    assert sqlgate_mcp.__all__ == sorted(sqlgate_mcp.__all__)
    assert len(set(sqlgate_mcp.__all__)) == len(sqlgate_mcp.__all__)
    for name in sqlgate_mcp.__all__:
        assert hasattr(sqlgate_mcp, name), name


@pytest.mark.parametrize(
    "module", [errors, tools, template_tools], ids=["errors", "tools", "template_tools"]
)
def test_the_examples_in_the_docstrings_run(module: Any) -> None:
    failures, tried = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0


@pytest.mark.parametrize("name", ["actor", "approved", "decisions", "Reviewer", "on_behalf_of"])
def test_a_decision_or_an_identity_is_refused_whatever_the_tool(name: str) -> None:
    with pytest.raises(ToolRefusal) as refused:
        refuse_arguments("run_status", {"run_id", name}, {"run_id"})
    assert refused.value.code == "argument_refused"
    assert refused.value.payload()["error"]["arguments"] == [name]


def test_declared_arguments_pass_and_others_are_unknown() -> None:
    refuse_arguments("ask", {"question"}, {"question", "questions"})
    with pytest.raises(ToolRefusal) as refused:
        refuse_arguments("ask", {"question", "limit"}, {"question", "questions"})
    assert refused.value.code == "unknown_argument"
    assert "question, questions" in refused.value.message


def test_every_refusal_code_is_documented() -> None:
    for code in (
        "argument_refused",
        "unknown_argument",
        "forbidden",
        "run_not_found",
        "awaiting_approval",
        "still_running",
        "unsafe",
        "rate_limited",
        "invalid_arguments",
        "invalid_input",
        "unknown_tool",
        "not_cancellable",
        "no_rows",
        "cancelled",
    ):
        assert code in errors.__doc__
