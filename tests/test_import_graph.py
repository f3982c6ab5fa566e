"""The import graph of sqlgate's packages: no circle anywhere, the libraries (``safety``,
``agents``, ``approvals``, ``ratelimit``) never import ``orchestrator``, the run's supporting
modules (memory, the state database, limits, configuration) never import the pipeline, and the
three floors of ``orchestrator/`` import only downwards.

Read with ``ast``, nothing imported: an edge A -> B is a module-level import in A that runs when
A is imported (imports inside functions and under ``if TYPE_CHECKING:`` do not), naming module B
(``from orchestrator.features.memory import store`` names ``orchestrator.features.memory.store``;
``from orchestrator.features.memory import memory_for`` names ``orchestrator.features.memory``).

The type-level graph adds the imports under ``if TYPE_CHECKING:``: a circle there is still two
modules that cannot be understood (or moved) one without the other, so none is allowed either.

The floors (``orchestrator/core``, ``orchestrator/features``, ``orchestrator/interfaces``) are
checked on every import, module-level, inside a function or under ``if TYPE_CHECKING:``:

- nothing in core or features imports interfaces (the CLI, the servers, the worker's tasks) or
  the composition root (``orchestrator.wiring``) that plugs the features in;
- core imports nothing from features: a feature reaches a run through the hooks it is given
  (``orchestrator.core.hooks``) and the stores registered with the state database;
- no stage (``orchestrator.core.stages``) names the pipeline: each is given what it may use of it
  (``orchestrator.core.stage_context``).

The libraries sit below ``orchestrator``: no import of theirs, wherever it is written (module
level, inside a function, under ``TYPE_CHECKING``), names it, and each imports only the
libraries it stands on (``LIBRARY_MAY_IMPORT``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.test_moved_modules import MOVED_MODULES

ROOT = Path(__file__).resolve().parent.parent
#: The product's import packages: ``orchestrator`` on top of the four libraries.
LIBRARIES = ("safety", "agents", "approvals", "ratelimit")
PACKAGES = ("orchestrator", *LIBRARIES)

#: Modules the pipeline is built from or that it uses: none of them may import it.
MUST_NOT_IMPORT_THE_PIPELINE = (
    "orchestrator.features.memory",
    "orchestrator.core.state_db",
    "orchestrator.core.limits",
    "orchestrator.core.config",
)


def _name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the product's packages under ``root``, by dotted name, and the shared
    ``sqlgate_exports`` module when it is there."""
    found = {
        _name(path, root): path
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
    }
    if (root / "sqlgate_exports.py").exists():
        found["sqlgate_exports"] = root / "sqlgate_exports.py"
    return found


MODULES = _modules()


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(
    body: list[ast.stmt],
    module: str,
    is_package: bool,
    typing: bool = False,
    known: Mapping[str, Path] = MODULES,
) -> Iterator[str]:
    """Dotted names the statements import when they run at module level (with ``typing``,
    those under ``if TYPE_CHECKING:`` too); ``known`` tells a submodule from an attribute."""
    for node in body:
        if isinstance(node, ast.If):
            if typing or not _type_checking(node.test):
                yield from _imported(node.body, module, is_package, typing, known)
            yield from _imported(node.orelse, module, is_package, typing, known)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _imported(block, module, is_package, typing, known)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in known]
            if len(submodules) < len(node.names):
                yield source
            yield from submodules


def _deepest(name: str, known: Mapping[str, Path]) -> str | None:
    """The deepest module of ours that a dotted import name names, if any."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def _graph(typing: bool = False, known: Mapping[str, Path] = MODULES) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text())
        named = _imported(tree.body, module, path.name == "__init__.py", typing, known)
        graph[module] = {t for t in (_deepest(n, known) for n in named) if t and t != module}
    return graph


CORE = "orchestrator.core"
FEATURES = "orchestrator.features"
INTERFACES = "orchestrator.interfaces"
#: The composition root: it imports the features and hands them to the core; nothing below it
#: imports it.
WIRING = "orchestrator.wiring"
STAGES = "orchestrator.core.stages"
PIPELINE = "orchestrator.core.pipeline"


def _within(module: str, package: str | tuple[str, ...]) -> bool:
    packages = (package,) if isinstance(package, str) else package
    return any(module == p or module.startswith(p + ".") for p in packages)


def _every_import(
    node: ast.AST, module: str, is_package: bool, typing: bool = False
) -> Iterator[str]:
    """Dotted names every import under ``node`` names, at any depth (inside functions and
    classes too), except those under ``if TYPE_CHECKING:`` (with ``typing``, those too)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test) and not typing:
            for stmt in child.orelse:
                yield from _every_import(
                    ast.Module(body=[stmt], type_ignores=[]), module, is_package
                )
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield from _imported([child], module, is_package, typing)
        else:
            yield from _every_import(child, module, is_package, typing)


def _deep_graph(typing: bool = False) -> dict[str, set[str]]:
    """Like ``_graph`` but with every import that can run, wherever it is written (with
    ``typing``, those under ``if TYPE_CHECKING:`` too)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        named = _every_import(
            ast.parse(path.read_text()), module, path.name == "__init__.py", typing
        )
        graph[module] = {t for t in (_deepest(n, MODULES) for n in named) if t and t != module}
    return graph


def _whole_graph(known: Mapping[str, Path] = MODULES) -> dict[str, set[str]]:
    """Every import statement, wherever it is written: module level, inside functions and
    classes, and under ``if TYPE_CHECKING:``."""
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        named = [
            name
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Import | ast.ImportFrom)
            for name in _imported([node], module, is_package, True, known)
        ]
        graph[module] = {t for t in (_deepest(n, known) for n in named) if t and t != module}
    return graph


#: The product packages each library may import (as its package docstring says): ``agents``
#: stands on ``safety``; the others on none; ``orchestrator`` stands on all four.
LIBRARY_MAY_IMPORT = {"safety": (), "ratelimit": (), "approvals": (), "agents": ("safety",)}


def _library_breaches(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a library (``safety``, ``agents``, ``approvals``, ``ratelimit``) of
    ``orchestrator``, which is built on them, or of a library it does not stand on."""
    breaches = []
    for module, edges in sorted(graph.items()):
        library = module.split(".")[0]
        if library not in LIBRARY_MAY_IMPORT:
            continue
        for target in sorted(edges):
            package = target.split(".")[0]
            if package in PACKAGES and package not in (library, *LIBRARY_MAY_IMPORT[library]):
                breaches.append(f"{module} -> {target}")
    return breaches


def _floor_breaches(graph: dict[str, set[str]]) -> list[str]:
    breaches = []
    for module, edges in sorted(graph.items()):
        for target in sorted(edges):
            lower = _within(module, (CORE, FEATURES))
            if (lower and _within(target, (INTERFACES, WIRING))) or (
                _within(module, CORE) and _within(target, FEATURES)
            ):
                breaches.append(f"{module} -> {target}")
    return breaches


def _stages_naming_the_pipeline(graph: dict[str, set[str]]) -> list[str]:
    return sorted(m for m, edges in graph.items() if _within(m, STAGES) and PIPELINE in edges)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_is_read() -> None:
    graph = _graph()
    assert graph["orchestrator.core.pipeline"] >= {
        "orchestrator.core.run_context",
        "orchestrator.core.stages",
    }
    assert (
        "orchestrator.features.memory.review_memory" in graph["orchestrator.features.memory.hooks"]
    )
    # under TYPE_CHECKING only: not an edge
    assert "orchestrator.core.pipeline" not in graph["orchestrator.features.memory.hooks"]


@pytest.mark.parametrize("reach", ["module-level", "type-level", "every import"])
def test_no_import_circle_in_any_package(reach: str) -> None:
    """No circle among the modules of all five packages: not among the imports that run when a
    module is imported, not once those under ``TYPE_CHECKING`` are added, and not even counting
    the imports written inside functions (two modules that each reach for the other when called
    cannot be understood, or moved, one without the other either)."""
    assert {p.split(".")[0] for p in MODULES} == {*PACKAGES, "sqlgate_exports"}
    graph = {
        "module-level": _graph,
        "type-level": lambda: _graph(typing=True),
        "every import": _whole_graph,
    }[reach]()
    assert _circles(graph) == []


def test_the_libraries_never_import_orchestrator() -> None:
    """``safety``, ``agents``, ``approvals`` and ``ratelimit`` are below ``orchestrator``: not
    one import of theirs names it, not inside a function, not for typing; nor does one import a
    library it does not stand on (``LIBRARY_MAY_IMPORT``)."""
    assert set(LIBRARY_MAY_IMPORT) == set(LIBRARIES)
    assert _library_breaches(_whole_graph()) == []


def test_the_export_helper_imports_nothing_of_ours() -> None:
    """Every package imports ``sqlgate_exports``, so it must import none of them."""
    assert _whole_graph()["sqlgate_exports"] == set()


def test_the_whole_graph_reads_every_import() -> None:
    whole, typing = _whole_graph(), _graph(typing=True)
    # the explorer reads SQLite's comments with a module it imports inside a function
    assert "agents.sqlite_comments" in whole["agents.schema_explorer"]
    assert "agents.sqlite_comments" not in typing["agents.schema_explorer"]
    # ``RuleContext`` names ``ViewLineages`` for typing only
    assert "safety.lineage" in typing["safety.rule_context"]
    assert "safety.lineage" not in _graph()["safety.rule_context"]
    assert "safety.lineage" in whole["safety.rule_context"]


def test_a_circle_and_a_library_breach_would_be_found_in_source(tmp_path: Path) -> None:
    """The readers on a synthetic tree: a circle closed only under ``TYPE_CHECKING`` (through a
    relative import), and libraries importing ``orchestrator`` inside a function and for typing."""
    files = {
        "orchestrator/__init__.py": "",
        "orchestrator/core/__init__.py": "",
        "orchestrator/core/pipeline.py": "",
        "safety/__init__.py": "",
        "safety/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
        "safety/b.py": "from . import a\n",
        "agents/__init__.py": "",
        "agents/x.py": "def f():\n    from orchestrator.core import pipeline\n",
        "approvals/__init__.py": "",
        "approvals/y.py": "import typing\nif typing.TYPE_CHECKING:\n    import orchestrator\n",
        "ratelimit/__init__.py": "from ratelimit import z\n",
        "ratelimit/z.py": "import safety.a\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    known = _modules(tmp_path)
    assert _circles(_graph(known=known)) == []
    assert _circles(_graph(typing=True, known=known)) == [["safety.a", "safety.b"]]
    assert _library_breaches(_whole_graph(known)) == [
        "agents.x -> orchestrator.core.pipeline",
        "approvals.y -> orchestrator",
        "ratelimit.z -> safety.a",
    ]
    assert _library_breaches(_graph(typing=True, known=known)) == [
        "approvals.y -> orchestrator",
        "ratelimit.z -> safety.a",
    ]


def test_a_circle_would_be_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_pipeline_is_imported_by_none_of_its_parts() -> None:
    graph = _graph()
    offenders = {
        module: sorted(edges & {"orchestrator.core.pipeline"})
        for module, edges in graph.items()
        if module.startswith(MUST_NOT_IMPORT_THE_PIPELINE) and "orchestrator.core.pipeline" in edges
    }
    assert offenders == {}


def test_memory_does_not_even_name_the_pipeline() -> None:
    """Memory is given what it needs (``MemoryUser``): not even a type annotation imports the
    pipeline."""
    graph = _graph(typing=True)
    # typing edges read: the stage context names the hooks for its annotations only
    assert "orchestrator.core.hooks" in graph["orchestrator.core.stage_context"]
    assert "orchestrator.core.hooks" not in _graph()["orchestrator.core.stage_context"]
    naming = sorted(
        module
        for module, edges in graph.items()
        if module.startswith("orchestrator.features.memory")
        and "orchestrator.core.pipeline" in edges
    )
    assert naming == []


def test_every_module_lives_on_a_floor() -> None:
    """Besides the package itself, the ``python -m orchestrator.cli`` entry module and the
    modules left at their old paths for one release, every module is in core, features or
    interfaces."""
    loose = sorted(
        m
        for m in MODULES
        if _within(m, "orchestrator")
        and not _within(m, (CORE, FEATURES, INTERFACES))
        and m.count(".") <= 1
    )
    assert loose == sorted(["orchestrator", "orchestrator.cli", WIRING, *MOVED_MODULES])
    assert _within("orchestrator.core.pipeline", CORE)
    assert not _within("orchestrator.core_extra", CORE)


def test_the_deep_graph_reads_imports_inside_functions_but_not_for_typing() -> None:
    graph = _deep_graph()
    # ``serve`` imports the server inside the function: an edge here, none at module level
    assert "orchestrator.interfaces.cli.main" in graph["orchestrator.cli"]
    assert any(
        _within(t, INTERFACES + ".server") for t in graph["orchestrator.interfaces.cli.main"]
    )
    # the state database names the server's store only for typing and inside a property
    assert "orchestrator.core.server_state" in graph["orchestrator.core.state_db"]
    assert "orchestrator.core.pipeline" not in graph["orchestrator.features.memory.hooks"]


def test_core_and_features_never_import_the_interfaces() -> None:
    """Nothing the run or its features are made of reaches the CLI, the servers, the worker's
    tasks or the composition root, and the core reaches no feature: not inside a function, not
    even for a type annotation."""
    assert _floor_breaches(_deep_graph(typing=True)) == []


def test_the_core_runs_on_what_it_defines() -> None:
    """The seams the features plug into are the core's own, and the features use them."""
    graph = _deep_graph(typing=True)
    assert not any(_within(t, FEATURES) for m in graph if _within(m, CORE) for t in graph[m])
    assert "orchestrator.core.hooks" in graph["orchestrator.features.memory.hooks"]
    assert {"orchestrator.features.risk", "orchestrator.features.memory.hooks"} <= graph[WIRING]


def test_no_stage_names_the_pipeline() -> None:
    """Each stage is given what it uses (``stage_context``): not even an annotation imports
    the pipeline, so a stage's imports show what it depends on."""
    graph = _deep_graph(typing=True)
    assert any(_within(m, STAGES) for m in graph)
    assert _stages_naming_the_pipeline(graph) == []
    assert all(
        "orchestrator.core.stage_context" in graph[m]
        for m in graph
        if _within(m, STAGES) and m != STAGES
    )


def test_a_breach_of_the_floors_would_be_found() -> None:
    graph = {
        "orchestrator.core.a": {"orchestrator.interfaces.server.app"},
        "orchestrator.features.b": {"orchestrator.interfaces.tasks"},
        "orchestrator.core.c": {"orchestrator.features.demo", "orchestrator.features.memory"},
        "orchestrator.interfaces.d": {"orchestrator.core.a", "orchestrator.features.b", WIRING},
        "orchestrator.features.e": {"orchestrator.core.a", WIRING},
        "orchestrator.core.stages.f": {PIPELINE},
        WIRING: {"orchestrator.features.b", "orchestrator.core.a"},
    }
    assert _floor_breaches(graph) == [
        "orchestrator.core.a -> orchestrator.interfaces.server.app",
        "orchestrator.core.c -> orchestrator.features.demo",
        "orchestrator.core.c -> orchestrator.features.memory",
        "orchestrator.features.b -> orchestrator.interfaces.tasks",
        "orchestrator.features.e -> orchestrator.wiring",
    ]
    assert _stages_naming_the_pipeline(graph) == ["orchestrator.core.stages.f"]


def test_an_import_for_typing_or_inside_a_function_would_be_found() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from orchestrator.core.pipeline import Pipeline\n"
        "def stage():\n"
        "    from orchestrator.features.risk import risk_hooks\n"
    )
    tree = ast.parse(source)
    running = set(_every_import(tree, "orchestrator.core.stages.x", False))
    every = set(_every_import(tree, "orchestrator.core.stages.x", False, typing=True))
    assert running == {"orchestrator.features.risk", "typing"}
    assert every == running | {PIPELINE}
