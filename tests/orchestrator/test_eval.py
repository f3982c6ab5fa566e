"""``sqlgate eval``: record against the scripted server, replay with no model, same report.

The replies are the scripted server's (tests/scripted_llm): on the demo its scenarios, on Spider
dev the gold-SQL script (tests/scripted_llm/gold.py). Their accuracy is the script's, never a
model's, and the report says so (``scripted``). The committed cassettes (cassettes/eval_demo,
cassettes/eval_spider) replay in every run; ``--record-mode=rewrite`` records them again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import orchestrator.core.llm
from orchestrator.features.eval.report import EvalReport
from orchestrator.interfaces.cli.main import app
from tests.conftest import ROOT
from tests.scripted_llm.gold import GoldScript
from tests.scripted_llm.scenarios import SCENARIOS, ScenarioScript
from tests.scripted_llm.server import ScriptedLLMServer

runner = CliRunner()
DEMO_EVAL = ROOT / "tests" / "fixtures" / "eval" / "demo.yaml"
DEMO_CASSETTES = ROOT / "cassettes" / "eval_demo"
SPIDER_CASSETTES = ROOT / "cassettes" / "eval_spider"
SPIDER_SELECTION = ["--db-id", "concert_singer", "--db-id", "pets_1", "--per-db", "2"]


def _eval(args: list[str], env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, ["eval", *args], env=env)


def _report(path: Path) -> EvalReport:
    return EvalReport.model_validate_json(path.read_text())


def _record(
    monkeypatch: pytest.MonkeyPatch, responder: Any, args: list[str], cassettes: Path
) -> Any:
    """``sqlgate eval ... --record cassettes`` against the scripted server (replaced whole)."""
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    if cassettes.exists():
        shutil.rmtree(cassettes)
    with ScriptedLLMServer(responder) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "SQLGATE_MODEL": "sqlgate-scripted"}
        result = _eval([*args, "--record", str(cassettes), "--rate-limit", "100000/60"], env)
        server.assert_no_errors()
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", False)
    return result


@pytest.fixture
def spider_dir(corpora: Path, tmp_path: Path) -> Path:
    from tests.safety.safety_corpora import load_spider_sqlite

    for name in ("concert_singer", "pets_1"):
        (tmp_path / "database" / name).mkdir(parents=True)
        load_spider_sqlite(name, tmp_path / "database" / name / f"{name}.sqlite")
    return tmp_path / "database"


def _spider_gold(corpora: Path) -> GoldScript:
    entries = json.loads((corpora / "spider_dev" / "dev.json").read_text())
    return GoldScript({e["question"]: e["query"] for e in entries})


# -- record -> replay gives the same report ----------------------------------------------------


def test_demo_round_trip_record_then_replay_gives_the_same_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_url: str
) -> None:
    common = [str(DEMO_EVAL), "--db", demo_url, "--approve-all"]
    recorded = _record(
        monkeypatch,
        ScenarioScript(SCENARIOS),
        [*common, "--out", str(tmp_path / "record.json")],
        tmp_path / "cassettes",
    )
    assert recorded.exit_code == 0, recorded.output
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    replayed = _eval(
        [*common, "--replay", str(tmp_path / "cassettes"), "--out", str(tmp_path / "replay.json")]
    )
    assert replayed.exit_code == 0, replayed.output
    record, replay = _report(tmp_path / "record.json"), _report(tmp_path / "replay.json")
    assert (record.mode, replay.mode) == ("record", "replay")
    assert record.comparable() == replay.comparable()
    assert record.scripted and replay.scripted  # the scripted server's header, kept in cassettes
    outcomes = {q.id: (q.outcome, q.status) for q in replay.questions}
    assert outcomes == {
        "top-categories": ("correct", "answered"),
        "orders-by-segment": ("correct", "answered"),  # after one correction
        "products-per-category": ("correct", "answered"),
        "orders-2025-03": ("correct", "answered"),
        "cancelled-orders": ("not_answered", "unsafe"),
        "best-ones": ("not_answered", "needs_clarification"),
        "books": ("correct", "answered"),  # expected_rows
        "orders-2025-12": ("wrong", "answered"),  # another definition than the gold's
    }
    assert replay.totals.execution_accuracy == pytest.approx(5 / 8, abs=1e-4)
    by_id = {q.id: q for q in replay.questions}
    assert by_id["orders-by-segment"].llm_calls == 4 and by_id["top-categories"].llm_calls == 3
    assert replay.totals.llm_calls == sum(q.llm_calls for q in replay.questions)
    assert replay.totals.prompt_tokens > 0 and replay.totals.error_codes == {"not_a_query": 1}


def test_spider_dev_round_trip_record_then_replay_gives_the_same_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, corpora: Path, spider_dir: Path
) -> None:
    dev = corpora / "spider_dev" / "dev.json"
    common = [str(dev), "--db-dir", str(spider_dir), "--approve-all", *SPIDER_SELECTION]
    recorded = _record(
        monkeypatch,
        _spider_gold(corpora),
        [*common, "--out", str(tmp_path / "record.json")],
        tmp_path / "cassettes",
    )
    assert recorded.exit_code == 0, recorded.output
    replayed = _eval(
        [*common, "--replay", str(tmp_path / "cassettes"), "--out", str(tmp_path / "replay.json")]
    )
    assert replayed.exit_code == 0, replayed.output
    record, replay = _report(tmp_path / "record.json"), _report(tmp_path / "replay.json")
    assert record.comparable() == replay.comparable()
    assert replay.scripted and replay.totals.questions == 4
    assert {q.db.rsplit("/", 1)[-1] for q in replay.questions} == {
        "concert_singer.sqlite",
        "pets_1.sqlite",
    }
    # The gold SQL as the "model's" answer: right unless the pipeline changed its result.
    assert replay.totals.correct == 4


# -- the committed cassettes replay (or are recorded again with --record-mode=rewrite) ----------


def test_committed_demo_cassettes_replay(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_url: str, record_mode: str
) -> None:
    common = [str(DEMO_EVAL), "--db", demo_url, "--approve-all"]
    if record_mode == "rewrite":
        assert (
            _record(monkeypatch, ScenarioScript(SCENARIOS), common, DEMO_CASSETTES).exit_code == 0
        )
    out = tmp_path / "report.json"
    result = _eval([*common, "--replay", str(DEMO_CASSETTES), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert _report(out).totals.replay_misses == 0
    assert (_report(out).totals.correct, _report(out).totals.wrong) == (5, 1)


def test_committed_spider_cassettes_replay(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    corpora: Path,
    spider_dir: Path,
    record_mode: str,
) -> None:
    common = [
        str(corpora / "spider_dev" / "dev.json"),
        "--db-dir",
        str(spider_dir),
        "--approve-all",
        *SPIDER_SELECTION,
    ]
    if record_mode == "rewrite":
        recorded = _record(monkeypatch, _spider_gold(corpora), common, SPIDER_CASSETTES)
        assert recorded.exit_code == 0, recorded.output
    result = _eval([*common, "--replay", str(SPIDER_CASSETTES), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["scripted"] is True and report["totals"]["correct"] == 4


# -- a replay that no longer matches, a regression, the approvals --------------------------------


def test_a_changed_question_is_a_replay_miss_with_exit_16(tmp_path: Path, demo_url: str) -> None:
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        DEMO_EVAL.read_text().replace(
            "How many orders were placed in 2025-03?", "How many orders were placed in 2025-04?"
        )
    )
    out = tmp_path / "report.json"
    result = _eval(
        [
            str(changed),
            "--db",
            demo_url,
            "--approve-all",
            "--replay",
            str(DEMO_CASSETTES),
            "--out",
            str(out),
        ]
    )
    assert result.exit_code == 16, result.output
    missed = [q for q in _report(out).questions if q.outcome == "replay_miss"]
    assert [q.id for q in missed] == ["orders-2025-03"]
    assert "no recorded interaction matches" in (missed[0].note or "")


def test_a_baseline_with_higher_accuracy_is_a_regression_with_exit_15(
    tmp_path: Path, demo_url: str
) -> None:
    common = [str(DEMO_EVAL), "--db", demo_url, "--approve-all", "--replay", str(DEMO_CASSETTES)]
    assert _eval([*common, "--out", str(tmp_path / "now.json")]).exit_code == 0
    better = json.loads((tmp_path / "now.json").read_text())
    better["totals"]["execution_accuracy"] = 0.8
    for q in better["questions"]:
        if q["id"] == "cancelled-orders":
            q["outcome"] = "correct"
    (tmp_path / "base.json").write_text(json.dumps(better))
    regressed = _eval([*common, "--baseline", str(tmp_path / "base.json")])
    assert regressed.exit_code == 15, regressed.output
    assert "REGRESSION" in regressed.output and "cancelled-orders" in regressed.output
    allowed = _eval([*common, "--baseline", str(tmp_path / "base.json"), "--threshold", "0.2"])
    assert allowed.exit_code == 0, allowed.output
    same = _eval([*common, "--baseline", str(tmp_path / "now.json")])
    assert same.exit_code == 0 and "no regression" in same.output


def test_without_approve_all_eval_refuses_to_start(demo_url: str) -> None:
    result = _eval([str(DEMO_EVAL), "--db", demo_url, "--replay", str(DEMO_CASSETTES)])
    assert result.exit_code == 2
    assert "pass --approve-all" in result.output
    assert result.output.count("error:") == 1


def test_approve_all_is_in_the_audit_log_and_teaches_nothing(tmp_path: Path, demo_url: str) -> None:
    from orchestrator.core.state_db import StateDatabase, default_state_url

    out = tmp_path / "report.json"
    args = [str(DEMO_EVAL), "--db", demo_url, "--approve-all", "--replay", str(DEMO_CASSETTES)]
    assert _eval([*args, "--out", str(out)]).exit_code == 0
    assert _report(out).approvals == "sqlgate eval --approve-all"
    state = StateDatabase(default_state_url())
    batches = state.approvals.list_batches(limit=100)
    assert batches, "every approval cycle of the eval is in the state database"
    actors = {
        e.actor
        for b in batches
        for e in state.approvals.audit_log(batch_id=b.batch.batch_id)
        if e.event == "vote_cast"
    }
    assert actors == {"sqlgate eval --approve-all"}
    votes = [v for b in batches for v in b.votes]
    assert votes and {v.review for v in votes} == {"unseen"}  # vouches for nothing
    assert state.memory.examples() == []  # nothing remembered from approvals nobody saw


def test_recorded_cassettes_carry_no_credentials_and_no_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_url: str
) -> None:
    """A key sent to the endpoint (and its host and port) never reaches a cassette."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-eval-secret-0123456789")
    one = tmp_path / "one.yaml"
    one.write_text(DEMO_EVAL.read_text().split("  - id: orders-by-segment")[0])
    result = _record(
        monkeypatch,
        ScenarioScript(SCENARIOS),
        [str(one), "--db", demo_url, "--approve-all"],
        tmp_path / "cassettes",
    )
    assert result.exit_code == 0, result.output
    text = (tmp_path / "cassettes" / "top-categories.yaml").read_text()
    assert "sk-eval-secret" not in text and "authorization" not in text.lower()
    assert "127.0.0.1" not in text and "http://llm.recorded/v1/chat/completions" in text


def test_a_live_eval_needs_no_cassettes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_url: str
) -> None:
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    one = tmp_path / "one.yaml"
    one.write_text(
        "- id: books\n"
        "  question: How many products are in the Books category?\n"
        "  expected_rows: [[15]]\n"
    )
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "SQLGATE_MODEL": "sqlgate-scripted"}
        result = _eval([str(one), "--db", demo_url, "--approve-all", "--json"], env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["mode"], report["totals"]["correct"], report["totals"]["llm_calls"]) == (
        "live",
        1,
        3,
    )


def test_a_database_that_cannot_be_opened_stops_the_eval_before_any_model_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, demo_url: str
) -> None:
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)
    two = tmp_path / "two.json"
    broken = f"sqlite:///{tmp_path}/absent/shop.sqlite"
    two.write_text(
        json.dumps(
            [
                {
                    "id": "a",
                    "question": "How many products are in the Books category?",
                    "expected_rows": [[15]],
                    "db": demo_url,
                },
                {
                    "id": "b",
                    "question": "How many products are in the Books category?",
                    "expected_rows": [[15]],
                    "db": broken,
                },
            ]
        )
    )
    with ScriptedLLMServer(ScenarioScript(SCENARIOS)) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "SQLGATE_MODEL": "sqlgate-scripted"}
        result = _eval([str(two), "--approve-all"], env)
        assert server.requests == []
    assert result.exit_code == 10, result.output
    assert "cannot open" in result.output and "Traceback" not in result.output
