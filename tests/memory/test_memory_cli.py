"""``sqlgate memory``: seeding refuses SQL that fails validation or execution; the rest curates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.core.state_db import StateDatabase
from orchestrator.interfaces.cli.main import app
from tests.conftest import as_reviewer

runner = CliRunner()


@pytest.fixture
def cli_state(state_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SQLGATE_STATE_URL", state_url)
    as_reviewer(monkeypatch, "alice")
    return state_url


def _json(*args: str) -> object:
    result = runner.invoke(app, ["memory", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_seeding_validates_and_runs_each_pair(
    cli_state: str, demo_db: Path, tmp_path: Path
) -> None:
    seed = tmp_path / "seed.jsonl"
    rows = [
        {
            "question": "How many customers are there?",
            "sql": "SELECT COUNT(customer_id) AS n FROM customers",
        },
        {
            "question": "Delete the cancelled orders",
            "sql": "DELETE FROM orders WHERE status = 'cancelled'",
        },
        {"question": "Every customer column", "sql": "SELECT * FROM customers"},
        {"question": "A column that does not exist", "sql": "SELECT no_such_column FROM customers"},
    ]
    seed.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    policy = tmp_path / "policy.toml"
    policy.write_text('select_star = "refuse"\n')  # the policy `ask --policy` would run under

    result = runner.invoke(
        app,
        ["memory", "add", str(seed), "--db", f"sqlite:///{demo_db}", "--policy", str(policy)]
        + ["--json"],
    )

    assert result.exit_code == 1  # some pairs were refused
    report = json.loads(result.stdout)
    assert [r["accepted"] for r in report] == [True, False, False, False]
    # the missing column is refused by the validator (every reference is resolved), not run
    assert [r["code"] for r in report][1:] == ["not_a_query", "select_star", "unresolved_column"]
    stored = StateDatabase(cli_state).memory.examples()
    assert [(e.question, e.status, e.reviewers) for e in stored] == [
        ("How many customers are there?", "seeded", ["alice"])
    ]
    assert stored[0].sql.endswith("LIMIT 1001")  # what is kept is the validated text


def test_seeding_expands_star_under_the_default_policy(
    cli_state: str, demo_db: Path, tmp_path: Path
) -> None:
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"question": "Every category", "sql": "SELECT * FROM categories"}))

    result = runner.invoke(
        app, ["memory", "add", str(seed), "--db", f"sqlite:///{demo_db}", "--json"]
    )

    assert result.exit_code == 0, result.output
    (stored,) = StateDatabase(cli_state).memory.examples()
    assert "*" not in stored.sql and "category_id" in stored.sql  # the columns, spelled out


def test_curation_commands(cli_state: str, demo_db: Path, tmp_path: Path) -> None:
    seed = tmp_path / "seed.csv"
    seed.write_text(
        "question,sql\nHow many orders are there?,SELECT COUNT(order_id) AS n FROM orders\n"
    )
    db = f"sqlite:///{demo_db}"
    assert runner.invoke(app, ["memory", "add", str(seed), "--db", db]).exit_code == 0

    listed = _json("list", "--db", db)
    assert isinstance(listed, list) and len(listed) == 1
    example = listed[0]
    shown = _json("show", str(example["id"]))
    assert isinstance(shown, dict) and shown["template_id"] == example["template_id"]

    note = _json("note", "Revenue excludes cancelled orders", "--tables", "orders,order_items")
    assert isinstance(note, dict) and note["tables"] == ["order_items", "orders"]
    assert len(_json("list", "--notes")) == 1  # type: ignore[arg-type]

    revoked = _json("revoke", example["template_id"][:6], "--reason", "too broad")
    assert isinstance(revoked, dict) and revoked["template_id"] == example["template_id"]

    exported = runner.invoke(app, ["memory", "export"])
    assert [json.loads(line)["type"] for line in exported.stdout.splitlines()] == [
        "example",
        "note",
    ]

    assert runner.invoke(app, ["memory", "remove", str(example["id"])]).exit_code == 0
    assert _json("list") == []
    missing = runner.invoke(app, ["memory", "remove", str(example["id"]), "--json"])
    assert (
        missing.exit_code == 1 and json.loads(missing.stdout)["error"]["code"] == "memory_not_found"
    )


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_seed_file_that_is_not_utf8_is_one_sentence(
    cli_state: str, demo_db: Path, tmp_path: Path, suffix: str
) -> None:
    seed = tmp_path / f"seed{suffix}"
    seed.write_bytes(b'{"question": "ok", "sql": "SELECT 1"}\n{"question": "caf\xe9"}\n')
    result = runner.invoke(app, ["memory", "add", str(seed), "--db", f"sqlite:///{demo_db}"])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    message = " ".join(result.output.split())
    assert f"seed{suffix}:2: not UTF-8 text (byte" in message and "Traceback" not in message
    assert StateDatabase(cli_state).memory.examples() == []
