"""A command imports only what it uses: ``sqlgate --version`` does not load the model's SDK, the
database drivers or the servers, and the sandbox worker loads no part of sqlgate beyond itself.

Each check runs in a fresh interpreter and reads ``sys.modules`` there: what a module imported
once stays imported, so the test process itself cannot tell.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Third-party packages that a command loads only when it uses them.
HEAVY = (
    "openai",
    "sqlalchemy",
    "sqlglot",
    "psycopg",
    "pymysql",
    "redis",
    "duckdb",
    "duckdb_engine",
    "fastapi",
    "uvicorn",
    "starlette",
    "mcp",
    "celery",
    "kombu",
    "httpx",
    "httpx2",
)


def _modules_after(code: str) -> set[str]:
    """The names in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    probe = (
        "import sys\n"
        f"{code}\n"
        "import json\n"
        "sys.stdout.write('\\n' + json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _loaded_after(code: str) -> set[str]:
    """Top-level package names in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    return {name.split(".")[0] for name in _modules_after(code)}


def _cli(*args: str) -> str:
    return (
        f"sys.argv = ['sqlgate', {', '.join(repr(a) for a in args)}]\n"
        "from orchestrator.interfaces.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
    )


def test_importing_the_command_line_loads_no_heavy_package() -> None:
    assert _loaded_after("import orchestrator.cli") & set(HEAVY) == set()


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("ask", "--help")])
def test_version_and_help_load_no_heavy_package(args: tuple[str, ...]) -> None:
    assert _loaded_after(_cli(*args)) & set(HEAVY) == set()


@pytest.mark.parametrize("args", [("--help",), ("batch", "--help"), ("ask", "--help")])
def test_help_loads_no_result_model(args: tuple[str, ...]) -> None:
    """The result model and the model client's module (with tenacity) are for runs."""
    modules = _modules_after(_cli(*args))
    assert modules & {"orchestrator.core.result", "orchestrator.core.llm", "tenacity"} == set()


def test_validate_loads_the_validator_but_not_the_model_or_the_servers() -> None:
    loaded = _loaded_after(_cli("validate", "SELECT 1", "--dialect", "sqlite", "--json"))
    assert "sqlglot" in loaded  # the command did its work
    assert loaded & {"openai", "fastapi", "uvicorn", "mcp", "celery", "redis", "psycopg"} == set()


def test_package_imports_are_lazy_but_complete() -> None:
    """``import orchestrator`` is cheap, and an exported name still resolves on first use."""
    assert _loaded_after("import orchestrator, agents, safety, approvals") & set(HEAVY) == set()
    loaded = _loaded_after("from orchestrator import Pipeline, RunStatus\nassert Pipeline.ask")
    assert {"sqlalchemy", "sqlglot"} <= loaded


def test_the_sandbox_worker_loads_only_the_standard_library() -> None:
    modules = _modules_after("import safety.sandbox_worker")
    ours = {m for m in modules if m.split(".")[0] in {"safety", "orchestrator", "agents"}}
    assert ours == {"safety", "safety.sandbox_worker"}
    outside = {
        m.split(".")[0]
        for m in modules
        if not m.startswith("_") and m.split(".")[0] not in sys.stdlib_module_names
    }
    # ``safety/__init__`` takes its lazy-export helper from ``sqlgate_exports`` (standard library
    # only): nothing else outside the standard library is loaded.
    assert outside == {"safety", "sqlgate_exports"}
