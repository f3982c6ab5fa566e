"""The command line as scripts use it: --json contracts and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import orchestrator.core.llm
from orchestrator.interfaces.cli.main import app
from tests.scripted_llm import scenarios as sc

runner = CliRunner()


def _json(output: str):
    return json.loads(output)


def test_demo_json_prints_one_result_per_question(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", "--json", "--workdir", str(tmp_path)])

    assert result.exit_code == 0, result.output
    runs = _json(result.stdout)
    assert [r["status"] for r in runs] == [
        "answered",
        "answered",
        "answered",
        "needs_clarification",
    ]
    assert [r["llm_calls"] for r in runs] == [3, 2, 4, 1]
    for run in runs:
        for key in (
            "question",
            "status",
            "sql",
            "answer",
            "row_count",
            "warnings",
            "llm_calls",
            "trace",
        ):
            assert key in run
        assert all({"agent", "batch"} <= set(entry) for entry in run["trace"])


def test_validate_accepts_and_prints_the_rewritten_sql() -> None:
    result = runner.invoke(
        app, ["validate", "SELECT name FROM products", "--dialect", "sqlite", "--json"]
    )

    assert result.exit_code == 0, result.output
    body = _json(result.stdout)
    assert body["ok"] is True and "LIMIT" in body["sql"].upper()


@pytest.mark.parametrize(
    "sql",
    ["DELETE FROM products", "SELECT 1; DROP TABLE products", "SELECT * FROM products", ""],
    ids=["dml", "stacked", "star", "empty"],
)
def test_validate_refuses_with_a_code_and_a_reason(sql: str) -> None:
    result = runner.invoke(app, ["validate", sql, "--dialect", "sqlite", "--json"])

    assert result.exit_code == 1, result.output
    body = _json(result.stdout)
    assert body["ok"] is False and body["code"] and body["reason"]


def test_schema_json_lists_the_tables(demo_db: Path) -> None:
    result = runner.invoke(app, ["schema", "--db", f"sqlite:///{demo_db}", "--json"])

    assert result.exit_code == 0, result.output
    names = {t["name"] for t in _json(result.stdout)["tables"]}
    assert {"orders", "order_items", "customers", "products"} <= names


def test_ask_without_credentials_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, demo_db: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    result = runner.invoke(
        app, ["ask", "How many orders?", "--db", f"sqlite:///{demo_db}", "--yes", "--json"]
    )

    assert result.exit_code == 2
    body = _json(result.stdout)
    assert body["error"]["code"] == "config_error"
    assert "OPENAI_API_KEY" in body["error"]["message"]


@pytest.mark.parametrize(
    ("url", "code", "exit_code"),
    [
        ("not a url", "invalid_database_url", 2),
        ("sqlite:////nonexistent/dir/shop.db", "database_unreachable", 10),
        ("postgresql+psycopg://nobody@127.0.0.1:1/none", "database_unreachable", 10),
        ("postgresql+psycopg://nobody@localhost:abc/db", "invalid_database_url", 2),
    ],
    ids=["malformed", "missing-file", "unreachable-server", "port-not-a-number"],
)
def test_ask_with_a_bad_database_url(
    monkeypatch: pytest.MonkeyPatch, url: str, code: str, exit_code: int
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")

    result = runner.invoke(app, ["ask", "How many orders?", "--db", url, "--yes", "--json"])

    assert result.exit_code == exit_code, result.output
    assert _json(result.stdout)["error"]["code"] == code
    assert result.exception is None or isinstance(result.exception, SystemExit)  # no traceback


def test_a_missing_key_is_reported_before_a_missing_terminal(
    monkeypatch: pytest.MonkeyPatch, demo_db: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)

    result = runner.invoke(
        app, ["ask", "How many orders?", "--db", f"sqlite:///{demo_db}", "--json"]
    )

    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in _json(result.stdout)["error"]["message"]


def test_the_readme_exit_codes_are_the_cli_exit_codes() -> None:
    """One truth: every status's exit code in the README's table is the one the CLI exits with."""
    import re

    from orchestrator.core.result import BATCH_INCOMPLETE_EXIT, EXIT_CODES, WRONG_DATABASE_EXIT
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("### Exit codes and statuses", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", table, re.MULTILINE))
    assert {status.value: code for status, code in EXIT_CODES.items()} == {
        status: int(code) for status, code in rows.items()
    }
    others = [int(c) for c in re.findall(r"^\| \([^)]*\) \| (\d+) \|", table, re.MULTILINE)]
    from orchestrator.interfaces.cli.eval import EVAL_REGRESSION_EXIT, EVAL_REPLAY_MISS_EXIT

    assert sorted(others) == [
        1,
        BATCH_INCOMPLETE_EXIT,
        WRONG_DATABASE_EXIT,
        EVAL_REGRESSION_EXIT,
        EVAL_REPLAY_MISS_EXIT,
    ]


def test_ask_without_a_terminal_needs_yes(monkeypatch: pytest.MonkeyPatch, demo_db: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    # The settings are checked (and the client built) first; it stops before any request.
    monkeypatch.setattr(orchestrator.core.llm, "ALLOW_MODEL_REQUESTS", True)

    result = runner.invoke(
        app, ["ask", "How many orders?", "--db", f"sqlite:///{demo_db}", "--json"]
    )

    assert result.exit_code == 2
    assert _json(result.stdout)["error"]["code"] == "no_reviewer"


@pytest.mark.vcr
def test_ask_json_end_to_end(
    monkeypatch: pytest.MonkeyPatch, demo_db: Path, model_endpoint, vcr
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-0000000000")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])

    result = runner.invoke(
        app, ["ask", sc.PRODUCT_COUNT, "--db", f"sqlite:///{demo_db}", "--yes", "--json"]
    )

    assert result.exit_code == 0, result.output
    body = _json(result.stdout)
    assert body["status"] == "answered" and body["llm_calls"] == 3
    assert body["row_count"] == 8 or body["row_count"] > 0
    assert "sk-test" not in result.output

    # The window is shared through the state folder: the next process sees these three requests.
    limits = runner.invoke(app, ["limits", "--json"])
    assert limits.exit_code == 0, limits.output
    requests = _json(limits.stdout)["limits"][0]
    assert (requests["used"], requests["limit"]) == (3, 5)
    assert "sk-test" not in limits.stdout
