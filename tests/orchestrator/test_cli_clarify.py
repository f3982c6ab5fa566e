"""``sqlgate ask``'s clarification loop: the ids shown, answers by --answer or at a terminal, a
follow-up run linked to the run that asked (cassettes recorded from the scripted server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import orchestrator.interfaces.cli.clarify
from orchestrator.features.demo import AMBIGUOUS
from orchestrator.interfaces.cli.main import app

runner = CliRunner()


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch, model_endpoint) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000000000")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])


def _ask(demo_db: Path, *extra: str, input: str | None = None):
    return runner.invoke(
        app, ["ask", AMBIGUOUS, "--db", f"sqlite:///{demo_db}", "--yes", *extra], input=input
    )


@pytest.mark.vcr
def test_without_answers_it_shows_the_ids_says_how_to_answer_and_exits_3(
    demo_db: Path, model_env: None, vcr
) -> None:
    result = _ask(demo_db, "--json")

    assert result.exit_code == 3, result.output
    body = json.loads(result.stdout)
    assert body["status"] == "needs_clarification" and body["llm_calls"] == 1
    assert [q["id"] for q in body["clarification_questions"]] == ["metric", "entity"]
    assert "Answer with: sqlgate ask 'Show me the best ones.' --answer metric=... --answer " in (
        " ".join(result.stderr.split())
    )


@pytest.mark.vcr
def test_answers_start_a_follow_up_with_a_normal_budget(
    demo_db: Path, model_env: None, vcr
) -> None:
    # Room for both runs in the window (at the default 5 a minute, ask waits for the follow-up's
    # worst case of 5 requests to fit: up to a minute, and says so).
    result = _ask(
        demo_db,
        "--json",
        "--rate-limit",
        "20/60",
        "--answer",
        "metric=revenue",
        "--answer",
        "entity=products",
    )

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["status"] == "answered" and body["llm_calls"] == 3
    assert body["follow_up_of"] and body["follow_up_of"] != body["run_id"]
    assert body["question"].startswith(AMBIGUOUS + "\n\nThe analyst's answers")
    assert body["columns"] == ["product", "revenue"] and body["row_count"] == 5
    # The run that asked (1 call) and the follow-up (3): the shared window saw four requests.
    limits = json.loads(runner.invoke(app, ["limits", "--json"]).stdout)["limits"][0]
    assert limits["used"] == 4


@pytest.mark.vcr
def test_an_answer_to_a_question_not_asked_is_refused_in_one_sentence(
    demo_db: Path, model_env: None, vcr
) -> None:
    result = _ask(demo_db, "--json", "--answer", "period=2025")

    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "invalid_clarification"
    assert error["message"] == (
        "no clarifying question has the id 'period'; the ids asked are 'metric', 'entity'"
    )


def test_a_malformed_answer_is_refused_before_anything_is_asked(demo_db: Path) -> None:
    result = _ask(demo_db, "--json", "--answer", "revenue")

    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["message"].startswith(
        "--answer 'revenue' is not ID=TEXT"
    )


@pytest.mark.vcr
def test_at_a_terminal_the_analyst_answers_each_question_in_turn(
    demo_db: Path, model_env: None, vcr, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A terminal: stdin is a person (the answers typed: revenue, then products).
    monkeypatch.setattr(
        orchestrator.interfaces.cli.clarify, "_terminal", lambda as_json: not as_json
    )

    result = _ask(demo_db, "--no-trace", "--rate-limit", "20/60", input="revenue\nproducts\n")

    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "[metric] Best by which measure: revenue, units sold, or margin?" in out
    assert "[entity] The best what" in out
    assert "asking again with the answers, as a follow-up of run_" in out
    assert "Alpine Ergonomic Chair" in out
