"""Decision files through ``sqlgate approvals decide --file``: refused cleanly, state unchanged.

A real pending batch is opened by the gate in the state database the CLI reads
(``SQLGATE_STATE_URL``). Each broken file must give a JSON error with a stable code under
``--json``, a message without a traceback otherwise, and leave the batch, its version and its
audit log exactly as they were; a good file then decides the same batch.
"""

from __future__ import annotations

import json

import pytest
from approval_fakes import fake_validate, item
from typer.testing import CliRunner

from approvals import ApprovalGate, SqlApprovalStore
from orchestrator.interfaces.cli.main import app
from tests.conftest import as_reviewer

runner = CliRunner()


@pytest.fixture
def pending(tmp_path, monkeypatch):
    """(store, batch id, its two pending call_ids) in the CLI's state database."""
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    monkeypatch.setenv("SQLGATE_STATE_URL", url)
    as_reviewer(monkeypatch, "alice")
    store = SqlApprovalStore(url)
    store.setup()
    gate = ApprovalGate(None, fake_validate, store=store, run_id="run_decision_files")
    batch = gate.open([item(question_id="q1"), item(question_id="q2")])
    assert len(batch.pending_ids) == 2
    yield store, batch.batch_id, list(batch.pending_ids)
    store.close()


def _snapshot(store, batch_id):
    record = store.get_batch(batch_id)
    return record.status, record.version, len(store.audit_log(run_id=record.batch.run_id))


def _decide(batch_id, path, *extra):
    return runner.invoke(app, ["approvals", "decide", batch_id, "--file", str(path), *extra])


def _cases(ids):
    a, b = ids
    return {
        "null": ("null", "invalid_decision_file", 2),
        "number": ("42", "invalid_decision_file", 2),
        "float": ("1.5e3", "invalid_decision_file", 2),
        "list": (json.dumps([[a, "approve"], [b, "approve"]]), "invalid_decision_file", 2),
        "string": ('"approve"', "invalid_decision_file", 2),
        "boolean": ("true", "invalid_decision_file", 2),
        "not json": ("{" + f'"{a}": "approve",', "invalid_decision_file", 2),
        "not text": (b"\xff\xfe\x00\xd8garbage", "invalid_decision_file", 2),
        "too deep": ("[" * 100_000 + "]" * 100_000, "invalid_decision_file", 2),
        "same call_id twice": (
            f'{{"{a}": "approve", "{b}": "approve", "{a}": {{"action": "reject", "reason": "no"}}}}',
            "duplicate_call_id",
            1,
        ),
        "same key twice inside a decision": (
            f'{{"{a}": "approve", "{b}": {{"action": "edit", "sql": "SELECT 1", '
            f'"sql": "SELECT 2"}}}}',
            "duplicate_call_id",
            1,
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "null",
        "number",
        "float",
        "list",
        "string",
        "boolean",
        "not json",
        "not text",
        "too deep",
        "same call_id twice",
        "same key twice inside a decision",
    ],
)
def test_a_broken_decision_file_is_refused_and_changes_nothing(pending, tmp_path, case):
    store, batch_id, ids = pending
    content, code, exit_code = _cases(ids)[case]
    path = tmp_path / "decisions.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = _snapshot(store, batch_id)

    as_json = _decide(batch_id, path, "--json")
    assert as_json.exit_code == exit_code, as_json.output
    assert as_json.exception is None or isinstance(as_json.exception, SystemExit)
    body = json.loads(as_json.stdout)
    assert body["status"] == "error" and body["error"]["code"] == code

    plain = _decide(batch_id, path)
    assert plain.exit_code == exit_code
    assert "Traceback" not in plain.output
    assert _snapshot(store, batch_id) == before


def test_every_duplicate_is_named_at_once(pending, tmp_path):
    store, batch_id, (a, b) = pending
    path = tmp_path / "decisions.json"
    path.write_text(
        f'{{"{a}": "approve", "{a}": "approve", "{b}": "approve", "{b}": {{"action": "reject", '
        f'"reason": "x", "reason": "y"}}}}'
    )
    body = json.loads(_decide(batch_id, path, "--json").stdout)
    message = body["error"]["message"]
    assert body["error"]["code"] == "duplicate_call_id"
    assert f"{a}: decided more than once" in message
    assert f"{b}: decided more than once" in message
    assert "'reason' appears more than once" in message


def test_a_good_file_still_decides_the_same_batch(pending, tmp_path):
    store, batch_id, (a, b) = pending
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps({a: "approve", b: {"action": "reject", "reason": "not now"}}))
    result = _decide(batch_id, path, "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["resolutions"][a]["status"] == "approved"
    assert body["resolutions"][b]["status"] == "rejected"
    assert store.get_batch(batch_id).status == "resolved"


def test_an_oversized_file_is_refused_without_reading_it_all(pending, tmp_path):
    from approvals.decisions import MAX_DECISION_FILE_BYTES

    store, batch_id, (a, _b) = pending
    path = tmp_path / "decisions.json"
    head = f'{{"{a}": "approve", "pad": "'
    with path.open("w") as file:  # valid JSON, one byte over the cap
        file.write(head + "x" * (MAX_DECISION_FILE_BYTES - len(head) - 1) + '"}')
    assert path.stat().st_size == MAX_DECISION_FILE_BYTES + 1
    before = _snapshot(store, batch_id)
    plain = _decide(batch_id, path)
    assert plain.exit_code == 2, plain.output[-500:]
    message = " ".join(plain.output.split())
    assert "larger than 16 MiB" in message and "Traceback" not in plain.output
    assert _snapshot(store, batch_id) == before


def test_a_refused_value_is_quoted_cut_short(pending, tmp_path):
    store, batch_id, (a, b) = pending
    huge = "z" * 1_000_000
    path = tmp_path / "decisions.json"
    path.write_text(json.dumps({a: "approve", b: "approve", huge: "approve"}))
    plain = _decide(batch_id, path, "--json")
    assert plain.exit_code == 1
    message = json.loads(plain.stdout)["error"]["message"]
    assert len(message) < 2_000 and "(1,000,000 characters)" in message
