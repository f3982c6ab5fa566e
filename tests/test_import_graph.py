"""The import graph of ``orchestrator/``: no circle among its modules, and the run's supporting
modules (memory, the state database, limits, configuration) never import the pipeline.

Read with ``ast``, nothing imported: an edge A -> B is a module-level import in A that runs when
A is imported (imports inside functions and under ``if TYPE_CHECKING:`` do not), naming module B
(``from orchestrator.memory import store`` names ``orchestrator.memory.store``; ``from
orchestrator.memory import memory_for`` names ``orchestrator.memory``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "orchestrator"

#: Modules the pipeline is built from or that it uses: none of them may import it.
MUST_NOT_IMPORT_THE_PIPELINE = (
    "orchestrator.memory",
    "orchestrator.state_db",
    "orchestrator.limits",
    "orchestrator.config",
)


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(
    body: list[ast.stmt], module: str, is_package: bool, typing: bool = False
) -> Iterator[str]:
    """Dotted names the statements import when they run at module level (with ``typing``,
    those under ``if TYPE_CHECKING:`` too)."""
    for node in body:
        if isinstance(node, ast.If):
            if typing or not _type_checking(node.test):
                yield from _imported(node.body, module, is_package, typing)
            yield from _imported(node.orelse, module, is_package, typing)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _imported(block, module, is_package, typing)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            submodules = [
                f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES
            ]
            if len(submodules) < len(node.names):
                yield source
            yield from submodules


def _graph(typing: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges: set[str] = set()
        tree = ast.parse(path.read_text())
        for name in _imported(tree.body, module, path.name == "__init__.py", typing):
            parts = name.split(".")
            for end in range(len(parts), 0, -1):  # the deepest orchestrator module named
                candidate = ".".join(parts[:end])
                if candidate in MODULES:
                    if candidate != module:
                        edges.add(candidate)
                    break
        graph[module] = edges
    return graph


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
    assert graph["orchestrator.pipeline"] >= {"orchestrator.run_context", "orchestrator.stages"}
    assert "orchestrator.memory.review_memory" in graph["orchestrator.memory.hooks"]
    # under TYPE_CHECKING only: not an edge
    assert "orchestrator.pipeline" not in graph["orchestrator.memory.hooks"]


def test_no_import_circle_inside_orchestrator() -> None:
    assert _circles(_graph()) == []


def test_a_circle_would_be_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_the_pipeline_is_imported_by_none_of_its_parts() -> None:
    graph = _graph()
    offenders = {
        module: sorted(edges & {"orchestrator.pipeline"})
        for module, edges in graph.items()
        if module.startswith(MUST_NOT_IMPORT_THE_PIPELINE) and "orchestrator.pipeline" in edges
    }
    assert offenders == {}


def test_memory_does_not_even_name_the_pipeline() -> None:
    """Memory is given what it needs (``MemoryUser``): not even a type annotation imports the
    pipeline."""
    graph = _graph(typing=True)
    assert "orchestrator.pipeline" in graph["orchestrator.stages.approval"]  # typing edges read
    naming = sorted(
        module
        for module, edges in graph.items()
        if module.startswith("orchestrator.memory") and "orchestrator.pipeline" in edges
    )
    assert naming == []
