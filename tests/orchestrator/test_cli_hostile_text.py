"""Hostile text on every screen: what the asker or the model wrote is shown escaped, never run by
the terminal (ANSI cursor moves and erases, OSC titles, C1 controls, bidi overrides).

Every field a reviewer sees (question, SQL, purpose, assumptions, reasons, names, errors) is
filled with hostile content and printed through the real command line; no raw control byte may
reach the output. A lint-style test keeps every CLI module printing through the sanitising
console (``approvals.terminal_text``).
"""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from approvals import ApprovalGate, ApprovalItem, Approve, TerminalReviewer
from approvals.terminal_text import UNSAFE_CHARACTERS, json_text, terminal_console, visible
from orchestrator.core.checkpoint import FinishedCheckpoint, StartedCheckpoint
from orchestrator.core.result import ClarifyingQuestionOut, RunError, RunResult, RunStatus
from orchestrator.core.run_identity import DatabaseLogin
from orchestrator.core.state_db import StateDatabase
from orchestrator.features.memory import MemoryScope, ReviewMemory
from orchestrator.interfaces.cli.main import app
from tests.conftest import ROOT

#: Cursor up and erase line (rewrites the line above), an OSC window title, clear screen, a C1
#: CSI, carriage return, backspace, NUL, DEL, a right-to-left override and an isolate.
HOSTILE = (
    "\x1b[1A\x1b[2K\x1b]0;pwned\x07\x1b[2J\x9b31m\r\x08\x00\x7f"
    "\u202egnp.exe\u202c\u2066x\u2069\u200f end"
)
SQL = "SELECT 1 AS ok -- " + HOSTILE

runner = CliRunner()


def _assert_no_raw(output: str) -> None:
    raw = sorted({f"U+{ord(c):04X}" for c in output if ord(c) in UNSAFE_CHARACTERS})
    assert raw == [], f"raw control characters reached the terminal: {raw}"


def _assert_escaped(output: str) -> None:
    _assert_no_raw(output)
    assert "^[[1A^[[2K" in output  # shown, not obeyed
    assert "<U+202E>" in output


def _screen(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture
def hostile_state(tmp_path: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch):
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    monkeypatch.setenv("SQLGATE_STATE_URL", url)
    monkeypatch.setenv("COLUMNS", "400")  # whole lines: an escape is never cut by a wrap
    state = StateDatabase(url)
    state.setup()
    db = f"sqlite:///{demo_db}"
    item = ApprovalItem.new(
        question_id="q1:" + HOSTILE,
        question="Revenue? " + HOSTILE,
        sql=SQL,
        findings=[{"code": "hostile", "message": "finding " + HOSTILE, "severity": "warning"}],
    )
    gate = ApprovalGate(
        None, lambda sql: _Accepted(sql), store=state.approvals, run_id="run_" + HOSTILE
    )
    pending = gate.open([item])
    decided = ApprovalGate(None, lambda sql: _Accepted(sql), store=state.approvals, run_id="run_b")
    other = decided.open([ApprovalItem.new(question_id="q1", question="q?", sql="SELECT 2")])
    decided.submit(other.batch_id, {c: Approve() for c in other.pending_ids}, actor=HOSTILE)
    result = RunResult(
        run_id="run_done",
        question="Top customers? " + HOSTILE,
        status=RunStatus.EXECUTION_FAILED,
        answer="The answer " + HOSTILE,
        sql=SQL,
        warnings=["warning " + HOSTILE],
        assumptions=["assumption " + HOSTILE],
        clarification_questions=[ClarifyingQuestionOut(id="c1", text="which? " + HOSTILE)],
        error=RunError(code="execution_failed", message="database said " + HOSTILE),
    )
    state.runs.create(
        "run_done",
        db,
        FinishedCheckpoint(results=[result]),
        status="finished",
        owner=HOSTILE,
        login=DatabaseLogin(""),
    )
    state.runs.create(
        "run_" + HOSTILE,
        db,
        StartedCheckpoint(run_id="run_x", questions=["purpose " + HOSTILE]),
        status="queued",
        owner="owner " + HOSTILE,
        login=DatabaseLogin(""),
    )
    memory = ReviewMemory(state.memory)
    scope = MemoryScope.of(db, "sqlite", {"orders": [("order_id", "INTEGER")]}, {})
    example = memory.record(
        scope,
        question="How many? " + HOSTILE,
        sql="SELECT COUNT(order_id) FROM orders -- " + HOSTILE,
        status="rejected",
        reviewers=["reviewer " + HOSTILE],
        reason="reason " + HOSTILE,
    )
    state.memory.add_note("note " + HOSTILE, author="author " + HOSTILE, tables=["orders"])
    return pending.batch_id, example.id


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


class TestEveryScreenShowsHostileTextEscaped:
    def test_approvals_show_list_and_history(self, hostile_state) -> None:
        batch_id, _ = hostile_state
        _assert_escaped(_screen("approvals", "show", batch_id))
        _assert_no_raw(_screen("approvals", "list"))
        _assert_escaped(_screen("approvals", "history"))

    def test_approvals_decide(self, hostile_state, tmp_path: Path) -> None:
        batch_id, _ = hostile_state
        pending = json.loads(_screen("approvals", "show", batch_id, "--json"))
        decisions = tmp_path / "decisions.json"
        decisions.write_text(
            json.dumps({i["call_id"]: "approve" for i in pending["batch"]["items"]})
        )
        _assert_escaped(_screen("approvals", "decide", batch_id, "--file", str(decisions)))

    @pytest.mark.vcr  # a model client is built; a finished run asks it nothing (no cassette)
    def test_resume_prints_a_finished_runs_every_field_escaped(
        self, hostile_state, monkeypatch: pytest.MonkeyPatch, vcr
    ) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        output = _screen("resume", "run_done", "--trace", code=6)
        _assert_escaped(output)
        for field in ("Top customers?", "The answer", "warning", "assumption", "database said"):
            assert field in output

    def test_runs_list_and_show(self, hostile_state) -> None:
        _assert_escaped(_screen("runs", "list"))
        _assert_escaped(_screen("runs", "show", "run_done"))

    def test_memory_list_show_and_notes(self, hostile_state) -> None:
        _, example_id = hostile_state
        _assert_escaped(_screen("memory", "list", "--all"))
        _assert_escaped(_screen("memory", "show", str(example_id)))
        _assert_escaped(_screen("memory", "list", "--notes"))

    def test_an_error_naming_hostile_input_is_escaped(self, hostile_state) -> None:
        # (these messages quote the input with repr(), which escapes it already)
        _assert_no_raw(_screen("approvals", "show", "batch_" + HOSTILE, code=2))
        _assert_no_raw(_screen("runs", "show", "run_" + HOSTILE + "_nope", code=2))

    def test_json_output_parses_to_the_same_text_and_carries_no_raw_character(
        self, hostile_state
    ) -> None:
        result = runner.invoke(app, ["runs", "show", "run_done", "--json"])
        assert not any(ord(c) in UNSAFE_CHARACTERS for c in result.stdout)
        assert json.loads(result.stdout)["owner"] == HOSTILE

    def test_the_reviewer_prompt_shows_every_field_escaped_on_any_console(self) -> None:
        item = ApprovalItem.new(question_id="q1", question="Q " + HOSTILE, sql=SQL)
        gate = ApprovalGate(None, lambda sql: _Accepted(sql))
        batch = gate.open([item])
        for console_type in (Console, terminal_console):  # a caller's plain console too
            out = io.StringIO()
            console = console_type(file=out, width=400, force_terminal=False)
            prompts: list[str] = []

            def answer(prompt: str, prompts: list[str] = prompts) -> str:
                prompts.append(prompt)
                return "a"

            TerminalReviewer(console=console, input=answer)(batch)
            _assert_escaped(out.getvalue())


class TestTerminalText:
    @pytest.mark.parametrize("code", sorted(UNSAFE_CHARACTERS))
    def test_every_unsafe_character_is_made_visible(self, code: int) -> None:
        shown = visible(f"a{chr(code)}b")
        assert not any(ord(c) in UNSAFE_CHARACTERS for c in shown) and shown != f"a{chr(code)}b"
        assert json.loads(json_text(chr(code))) == chr(code)

    def test_text_without_controls_is_unchanged(self) -> None:
        text = "SELECT 'café', naïve\n\tFROM t -- 東京 ✓"
        assert visible(text) == text == json.loads(json_text(text))


#: The modules that print to a terminal. Each must print through ``terminal_console()`` (or the
#: shared ``err`` console made by it), never through a console or a stream of its own.
CLI_MODULES = sorted(
    [
        *ROOT.glob("orchestrator/interfaces/cli/*.py"),
        ROOT / "orchestrator/cli.py",
        ROOT / "orchestrator/features/render.py",
        ROOT / "approvals/terminal.py",
    ]
)
_STREAM_WRITES = {
    ("sys.stdout", "write"),
    ("sys.stderr", "write"),
    ("typer", "echo"),
    ("click", "echo"),
    ("typer", "secho"),
}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def _calls_json_text(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) == "json_text" for n in ast.walk(node))


class TestCliPrintsOnlyThroughTheSanitisingHelpers:
    @pytest.mark.parametrize("path", CLI_MODULES, ids=lambda p: p.name)
    def test_no_console_or_stream_of_its_own(self, path: Path) -> None:
        offences = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            owner, _, attr = name.rpartition(".")
            if name in ("Console", "rich.console.Console", "print", "pprint", "os.write"):
                offences.append(f"line {node.lineno}: {name}(...)")
            elif (owner, attr) in _STREAM_WRITES and not all(map(_calls_json_text, node.args)):
                offences.append(f"line {node.lineno}: {name}(...) without json_text")
        assert offences == [], f"{path.name} prints around approvals.terminal_text: {offences}"

    def test_the_lint_sees_what_it_forbids(self, tmp_path: Path) -> None:
        bad = tmp_path / "cli_bad.py"
        bad.write_text("import sys\nprint(x)\nsys.stdout.write(x)\nConsole().print(x)\n")
        found = [
            _name(n.func) for n in ast.walk(ast.parse(bad.read_text())) if isinstance(n, ast.Call)
        ]
        assert {"print", "sys.stdout.write", "Console"} <= set(found)
