"""Every install declares what its modules import: computed statically from pyproject.toml and the
installed packages' metadata (``tests.installs.reach``). ``python -m tests.installs`` checks the
same reach by importing it in fresh virtual environments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.core.extras import EXTRA_OF_MODULE
from tests.installs.reach import (
    INSTALLS,
    Graph,
    closure,
    declared,
    extra_of,
    providers,
    reach,
    unmet,
)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return Graph()


@pytest.mark.parametrize("install", INSTALLS)
def test_each_install_provides_every_package_its_modules_import(graph: Graph, install: str) -> None:
    packages = closure(declared()[install])
    missing = {m: unmet(graph, m, packages) for m in reach(graph, install)}
    assert {m: tops for m, tops in missing.items() if tops} == {}


def test_the_base_reaches_the_commands_of_every_stack(graph: Graph) -> None:
    base = set(reach(graph, "base"))
    for module in (
        "orchestrator.cli",
        "orchestrator.interfaces.cli.main",
        "orchestrator.core.state_db",
        "orchestrator.core.pipeline",
        "orchestrator.features.notify.channels",
        "orchestrator.interfaces.tasks",
    ):
        assert module in base


def test_a_package_imported_later_is_declared_and_named_by_its_extra(graph: Graph) -> None:
    """An import inside a function (a driver, a server) is provided by the base or by the extra
    that ``missing_extra`` names when it is absent, so the error says what to install."""
    installs = declared()
    base = closure(installs["base"])
    wrong = {}
    for module, imports in graph.imports.items():
        for top in imports.anywhere:
            if providers(top) & base:
                continue
            extra = EXTRA_OF_MODULE.get(top)
            if extra is None or not providers(top) & closure(installs[extra]):
                wrong[f"{module}: {top}"] = extra
    assert wrong == {}


def test_an_undeclared_module_level_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "orchestrator" / "core").mkdir(parents=True)
    (tmp_path / "orchestrator" / "__init__.py").write_text("")
    (tmp_path / "orchestrator" / "core" / "__init__.py").write_text("")
    (tmp_path / "orchestrator" / "core" / "state.py").write_text(
        "from orchestrator.core import hooks\n"
    )
    (tmp_path / "orchestrator" / "core" / "hooks.py").write_text(
        "from typing import TYPE_CHECKING\nimport sqlglot\nif TYPE_CHECKING:\n    import celery\n"
        "def post():\n    import redis\nimport httpx\n"
    )
    for package in ("agents", "safety", "ratelimit", "approvals"):
        (tmp_path / package).mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "sqlgate"\ndependencies = ["sqlglot"]\n[project.optional-dependencies]\n'
    )
    graph = Graph(tmp_path)
    packages = closure(declared(tmp_path / "pyproject.toml")["base"])
    assert graph.needs("orchestrator.core.state") == {"sqlglot", "httpx"}
    assert unmet(graph, "orchestrator.core.state", packages) == ["httpx"]
    assert graph.imports["orchestrator.core.hooks"].anywhere == {"sqlglot", "redis", "httpx"}


def test_the_extras_own_their_interfaces() -> None:
    assert extra_of("orchestrator.interfaces.server.app") == "server"
    assert extra_of("orchestrator.interfaces.mcp") == "mcp"
    assert extra_of("orchestrator.interfaces.serverless") == "base"
