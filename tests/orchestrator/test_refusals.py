"""What cannot keep its promise is refused in one sentence with an exit code, never a traceback:
an in-memory state database for anything that must outlive the process, a driver that is not
installed, a policy file that is not text, too large, or allows nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.core.errors import StateDatabaseError
from orchestrator.core.state_db import default_state_url, lasting
from safety import PolicyError
from safety.policy_file import MAX_POLICY_BYTES, Policy, load_policy

ROOT = Path(__file__).resolve().parents[2]

IN_MEMORY = [
    "sqlite://",
    "sqlite:///",
    "sqlite:///:memory:",
    "sqlite+pysqlite:///:memory:",
    "sqlite:///file::memory:?cache=shared",
    "sqlite:///file:state?mode=memory&uri=true",
]


@pytest.mark.parametrize("url", IN_MEMORY)
def test_an_in_memory_state_database_is_refused(url: str) -> None:
    with pytest.raises(StateDatabaseError, match="in-memory database that ends with the process"):
        default_state_url({"SQLGATE_STATE_URL": url})


@pytest.mark.parametrize(
    "url", ["sqlite:////var/lib/sqlgate/state.sqlite", "postgresql+psycopg://u@h/db", "notaurl"]
)
def test_a_lasting_state_database_passes(url: str) -> None:
    assert lasting(url) == url


def _sqlgate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=ROOT,
        env={**os.environ, "OPENAI_API_KEY": "unused", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_sentence(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert message.startswith("error: ") and message.count("error:") == 1, message
    return message


@pytest.mark.parametrize(
    "command",
    [
        ["ask", "How many products?", "--db", "sqlite:////nonexistent/x.db", "--defer"],
        ["runs", "list"],
        ["approvals", "list"],
        ["memory", "list"],
    ],
)
def test_commands_refuse_an_in_memory_state_database_with_exit_10(command: list[str]) -> None:
    message = _one_sentence(_sqlgate({"SQLGATE_STATE_URL": "sqlite:///"}, *command), 10)
    assert "in-memory database" in message


def test_a_state_url_whose_driver_is_absent_is_one_sentence() -> None:
    done = _sqlgate({"SQLGATE_STATE_URL": "postgresql+psycopg2://u@127.0.0.1/db"}, "runs", "list")
    message = _one_sentence(done, 10)
    assert "needs the Python module 'psycopg2', which is not installed" in message


def test_a_binary_or_oversized_policy_file_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "policy.toml"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(PolicyError, match="not UTF-8 text"):
        load_policy(binary)
    for command in (["validate", "SELECT 1"], ["ask", "How many?", "--db", "sqlite:///x.db"]):
        message = _one_sentence(_sqlgate({}, *command, "--policy", str(binary)), 2)
        assert "not UTF-8 text" in message
    huge = tmp_path / "huge.toml"
    huge.write_text("# " + "x" * MAX_POLICY_BYTES)
    with pytest.raises(PolicyError, match="larger than 1024 KiB"):
        load_policy(huge)


@pytest.mark.parametrize(
    ("toml", "where"),
    [
        ("[tables]\nallow = []\n", "tables"),
        ('[tables]\nallow = ["orders"]\ndeny = ["Orders"]\n', "tables"),
        ('[columns]\nallow = ["orders.id"]\ndeny = ["orders.id"]\n', "columns"),
        (
            '[tables]\nallow = ["orders", "items"]\n[roles.clerk.tables]\ndeny = ["orders", "items"]\n',
            "roles.clerk.tables",
        ),
    ],
)
def test_a_policy_that_allows_nothing_is_refused_when_it_loads(toml: str, where: str) -> None:
    with pytest.raises(PolicyError, match=f"{where}: the policy allows nothing"):
        Policy.from_toml_text(toml)


def test_a_policy_that_allows_something_still_loads() -> None:
    policy = Policy.from_toml_text('[tables]\nallow = ["orders", "items"]\ndeny = ["items"]\n')
    assert policy.tables.allow == ("orders", "items")


def test_ask_under_a_policy_that_allows_nothing_says_so(tmp_path: Path) -> None:
    policy = tmp_path / "none.toml"
    policy.write_text('[tables]\nallow = ["orders"]\ndeny = ["orders"]\n')
    done = _sqlgate(
        {}, "ask", "How many orders?", "--db", "sqlite:///x.db", "--policy", str(policy)
    )
    assert "the policy allows nothing" in _one_sentence(done, 2)
