"""A lean install: each command that needs an extra that is not installed says, in one sentence,
which ``pip install 'sqlgate[...]'`` to run, and exits 2; the demo needs no extra at all.

"Not installed" is simulated at the import boundary: the command runs in a fresh interpreter
whose first meta-path finder refuses the extra's modules, as if they were absent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Every module the extras bring (``orchestrator.core.extras.EXTRA_OF_MODULE``).
EVERY_EXTRA = (
    "psycopg,psycopg_binary,pymysql,duckdb,duckdb_engine,redis,fastapi,uvicorn,starlette,mcp,"
    "mcp_types,celery,kombu"
)

_RUN_WITHOUT = """
import sys
blocked = set(sys.argv[1].split(","))

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
sys.argv = ["sqlgate", *sys.argv[2:]]
from orchestrator.interfaces.cli.main import main
main()
"""


def _sqlgate_without(
    blocked: str, *args: str, tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SQLGATE_STATE_DIR": str(tmp_path / "state"),
        "OPENAI_API_KEY": "sk-test-not-used",
        "COLUMNS": "200",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", _RUN_WITHOUT, blocked, *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


CASES = [
    pytest.param(
        "psycopg",
        ["ask", "How many orders?", "--yes", "--db", "postgresql+psycopg://u@127.0.0.1:1/db"],
        {},
        "a postgresql database needs the postgres extra",
        "postgres",
        id="ask-postgres",
    ),
    pytest.param(
        "pymysql",
        ["schema", "--db", "mysql+pymysql://u@127.0.0.1:1/db"],
        {},
        "a mysql database needs the mysql extra",
        "mysql",
        id="schema-mysql",
    ),
    pytest.param(
        "duckdb,duckdb_engine",
        ["schema", "--db", "duckdb:///{tmp}/w.duckdb"],
        {},
        "a duckdb database needs the duckdb extra",
        "duckdb",
        id="schema-duckdb",
    ),
    pytest.param(
        "fastapi,uvicorn,starlette",
        ["serve", "--db", "sqlite:///{tmp}/x.db"],
        {},
        "sqlgate serve needs the server extra",
        "server",
        id="serve",
    ),
    pytest.param(
        "mcp,mcp_types",
        ["mcp", "--db", "sqlite:///{tmp}/x.db"],
        {},
        "sqlgate mcp needs the mcp extra",
        "mcp",
        id="mcp",
    ),
    pytest.param(
        EVERY_EXTRA,
        ["mcp", "--db", "sqlite:///{tmp}/x.db"],
        {},
        "sqlgate mcp needs the mcp extra",
        "mcp",
        id="mcp-without-server",
    ),
    pytest.param(
        "fastapi,uvicorn,starlette",
        ["mcp", "--db", "sqlite:///{tmp}/x.db", "--transport", "http"],
        {},
        "sqlgate mcp needs the mcp extra",
        "mcp",
        id="mcp-http-without-server",
    ),
    pytest.param(
        "celery,kombu",
        ["worker"],
        {"SQLGATE_BROKER_URL": "redis://127.0.0.1:1/0"},
        "running questions on workers needs the celery extra",
        "celery",
        id="worker",
    ),
    pytest.param(
        "redis",
        ["limits"],
        {"SQLGATE_RATE_BACKEND": "redis://127.0.0.1:1/0"},
        "the rate-limit window in Redis needs the redis extra",
        "redis",
        id="limits-redis",
    ),
    pytest.param(
        "psycopg",
        ["limits"],
        {"SQLGATE_RATE_BACKEND": "postgresql://u@127.0.0.1:1/db"},
        "the rate-limit window in PostgreSQL needs the postgres extra",
        "postgres",
        id="limits-postgres",
    ),
    pytest.param(
        "psycopg",
        ["approvals", "list"],
        {"SQLGATE_STATE_URL": "postgresql+psycopg://u@127.0.0.1:1/db"},
        "the state database postgresql+psycopg://u@127.0.0.1:1/db needs the postgres extra",
        "postgres",
        id="state-postgres",
    ),
]


@pytest.mark.parametrize(("blocked", "args", "env", "says", "extra"), CASES)
def test_a_missing_extra_is_named_in_one_sentence(
    tmp_path: Path, blocked: str, args: list[str], env: dict[str, str], says: str, extra: str
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = _sqlgate_without(blocked, *args, tmp_path=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {says}, which is not installed: pip install 'sqlgate[{extra}]'"]
    assert "Traceback" not in done.stderr


def test_the_json_error_carries_the_missing_extra_code(tmp_path: Path) -> None:
    done = _sqlgate_without(
        "psycopg",
        "ask",
        "How many orders?",
        "--yes",
        "--json",
        "--db",
        "postgresql+psycopg://u@127.0.0.1:1/db",
        tmp_path=tmp_path,
    )
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "missing_extra"
    assert "pip install 'sqlgate[postgres]'" in error["message"]


def test_the_demo_needs_no_extra(tmp_path: Path) -> None:
    done = _sqlgate_without(
        EVERY_EXTRA, "demo", "--json", "--workdir", str(tmp_path), tmp_path=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert [r["status"] for r in results].count("answered") >= 3


def test_a_sqlite_question_and_validation_need_no_extra(tmp_path: Path) -> None:
    done = _sqlgate_without(
        EVERY_EXTRA,
        "validate",
        "SELECT name FROM regions",
        "--dialect",
        "sqlite",
        "--json",
        tmp_path=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
