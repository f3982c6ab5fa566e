"""Truthful results: a result cut by the policy's LIMIT or the row cap says so in every output and
to the answer step; with a high cap the full result comes back whole through ``ask --out``."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agents import SQLExecutor
from orchestrator.interfaces.cli.main import app
from safety import SafetyPolicy, SqlValidator, open_readonly_engine
from tests.scripted_llm import scenarios as sc

runner = CliRunner()
ORDERS_SQL = sc.SCENARIOS[sc.ORDERS_2025].sql
HIGH_CAP = ["--max-limit", "100000", "--row-cap", "100000"]


def _direct(db: Path, sql: str) -> list[list[Any]]:
    with sqlite3.connect(db) as conn:
        return [list(row) for row in conn.execute(sql)]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def model_env(monkeypatch: pytest.MonkeyPatch, model_endpoint) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", model_endpoint[0])
    monkeypatch.setenv("SQLGATE_MODEL", model_endpoint[1])
    monkeypatch.setenv("SQLGATE_RATE_LIMIT", "1000/60")


def test_a_limit_the_policy_sets_reads_truncated_and_a_limit_the_question_asks_does_not(
    demo_db: Path,
) -> None:
    engine = open_readonly_engine(f"sqlite:///{demo_db}")
    validator = SqlValidator("sqlite", SafetyPolicy(max_limit=10))
    everything = _direct(demo_db, "SELECT order_id FROM orders ORDER BY order_id")
    assert len(everything) > 11

    def run(sql: str, row_cap: int = 1000) -> Any:
        checked = validator.validate(sql)
        assert checked.ok, checked.refusal
        return SQLExecutor(engine, row_cap=row_cap).run(checked, row_limit=validator.row_limit)

    try:
        added = run("SELECT order_id FROM orders ORDER BY order_id")  # LIMIT 11 added
        assert (added.rows, added.row_count, added.truncated) == (everything[:10], 10, True)
        lowered = run("SELECT order_id FROM orders ORDER BY order_id LIMIT 500")
        assert (lowered.rows, lowered.truncated) == (everything[:10], True)
        asked = run("SELECT order_id FROM orders ORDER BY order_id LIMIT 10")
        assert (asked.rows, asked.truncated) == (everything[:10], False)
        ten = "SELECT order_id FROM orders WHERE order_id IN (SELECT order_id FROM orders "
        ten += "ORDER BY order_id LIMIT 10) ORDER BY order_id"
        exactly = run(ten)  # exactly as many rows as the cap: nothing was cut
        assert (exactly.row_count, exactly.truncated) == (10, False)
        capped = run("SELECT order_id FROM orders ORDER BY order_id LIMIT 10", row_cap=4)
        assert (capped.rows, capped.row_cap, capped.truncated) == (everything[:4], 4, True)
    finally:
        engine.dispose()


@pytest.mark.vcr
def test_a_cut_result_says_truncated_in_ask_json_and_text_and_the_answer_is_told(
    tmp_path: Path, demo_db: Path, model_env: None
) -> None:
    args = ["ask", sc.ORDERS_2025, "--db", f"sqlite:///{demo_db}", "--yes"]

    as_json = runner.invoke(app, [*args, "--json"])

    assert as_json.exit_code == 0, as_json.output
    body = json.loads(as_json.stdout)
    assert (body["status"], body["row_count"], body["truncated"]) == ("answered", 1000, True)
    assert body["sql"].endswith("LIMIT 1001")  # the approved text is what ran
    assert any(w.startswith("row_cap_hit:") for w in body["warnings"])
    # The scripted model answers from its prompt: it was told the rows were cut.
    assert "the result was cut" in body["answer"]

    out = tmp_path / "cut.csv"
    as_text = runner.invoke(app, [*args, "--out", str(out)])

    assert as_text.exit_code == 0, as_text.output
    shown = _flat(as_text.output)
    assert "TRUNCATED" in shown and "row_cap_hit" in shown
    assert "1000 row(s) written to" in shown and "truncated" in shown.split("written to", 1)[1]
    with out.open(newline="") as handle:
        assert len(list(csv.reader(handle))) == 1 + 1000


@pytest.mark.vcr
def test_a_high_cap_gives_the_full_result_through_out_equal_to_a_direct_query(
    tmp_path: Path, demo_db: Path, model_env: None
) -> None:
    expected = _direct(demo_db, ORDERS_SQL)
    assert len(expected) > 1001  # more rows than the default cap would keep

    for name in ("orders.csv", "orders.jsonl"):
        out = tmp_path / name
        result = runner.invoke(
            app,
            ["ask", sc.ORDERS_2025, "--db", f"sqlite:///{demo_db}", "--yes", "--json"]
            + HIGH_CAP
            + ["--out", str(out)],
        )

        assert result.exit_code == 0, result.output
        body = json.loads(result.stdout)
        assert (body["truncated"], body["row_count"]) == (False, len(expected))
        assert len(body["rows_preview"]) == 20  # the result object stays small
        if name.endswith(".csv"):
            with out.open(newline="") as handle:
                header, *rows = list(csv.reader(handle))
            assert header == ["order_id", "order_date", "status"]
            assert rows == [[str(v) for v in row] for row in expected]
        else:
            records = [json.loads(line) for line in out.read_text().splitlines()]
            assert [list(r.values()) for r in records] == expected
    assert not list(tmp_path.glob(".*.part"))  # no temporary file left behind


def test_out_with_an_unknown_extension_is_refused_before_anything_runs(
    tmp_path: Path, demo_db: Path
) -> None:
    result = runner.invoke(
        app,
        ["ask", "How many orders?", "--db", f"sqlite:///{demo_db}", "--yes", "--json"]
        + ["--out", str(tmp_path / "rows.xlsx")],
    )

    assert result.exit_code == 2
    assert ".csv or .jsonl" in json.loads(result.stdout)["error"]["message"]
