"""Which of sqlgate's modules each install can import, computed from what pyproject.toml declares.

An install is the base (``pip install sqlgate``) or one extra alone (``sqlgate[server]``). Its
packages are the closure of its declared requirements, read from the metadata of the packages
installed here (the full ``[test]`` environment, which holds every extra). A module's needs are
the third-party packages it imports when it is imported: its module-level imports (not those
under ``TYPE_CHECKING`` nor inside functions) and those of every module of ours it imports at
module level, parent packages included. An install's reach is the base's modules and those of
its own extra (``EXTRA_MODULES``); each of their needs must be provided by one of its packages.

``python -m tests.installs`` imports each reach in a fresh virtual environment holding only that
install's packages, so this computation is checked against the packages as they really are.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("orchestrator", "agents", "safety", "ratelimit", "approvals")
#: Top-level modules of ours that are single files (``py-modules`` in pyproject.toml).
SINGLE_MODULES = ("sqlgate_exports",)
OURS = PACKAGES + SINGLE_MODULES
#: The installs a user can choose: the base and each extra alone (``all`` and the development
#: extras ``test`` and ``bench`` are unions or tools, not stacks).
INSTALLS = (
    "base",
    "postgres",
    "mysql",
    "duckdb",
    "redis",
    "server",
    "mcp",
    "celery",
    "otel",
    "eval",
)

#: Modules that belong to an extra, by name prefix; every other module is the base install's.
EXTRA_MODULES = {
    "orchestrator.interfaces.server": "server",
    "orchestrator.interfaces.auth": "server",
    "orchestrator.interfaces.mcp": "mcp",
    "ratelimit.backends.postgres": "postgres",
    "ratelimit.backends.redis": "redis",
    "orchestrator.features.eval.pytest_plugin": "eval",
}


@dataclass(frozen=True)
class Imports:
    """What one module imports: at module level (ours and third-party), and anywhere."""

    ours: frozenset[str]
    third_party: frozenset[str]
    anywhere: frozenset[str]


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of sqlgate's packages, by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    for name in SINGLE_MODULES:
        if (root / f"{name}.py").exists():
            found[name] = root / f"{name}.py"
    return found


def _resolve(module: str, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")  # a package's own name ends in ``.__init__`` here
        base = ".".join(parts[: len(parts) - node.level])
        if node.module:
            base = f"{base}.{node.module}" if base else node.module
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _under_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(name: str, path: Path) -> Imports:
    tree = ast.parse(path.read_text(), filename=str(path))
    own = name if path.name != "__init__.py" else f"{name}.__init__"
    top_level: set[str] = set()
    anywhere: set[str] = set()

    def visit(node: ast.AST, in_function: bool, type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                names = (
                    [alias.name for alias in child.names]
                    if isinstance(child, ast.Import)
                    else _resolve(own, child)
                )
                if not type_checking:
                    anywhere.update(names)
                    if not in_function:
                        top_level.update(names)
            visit(
                child,
                in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef),
                type_checking or (isinstance(child, ast.If) and _under_type_checking(child)),
            )

    visit(tree, False, False)
    ours = {n for n in top_level if n.split(".")[0] in OURS}
    return Imports(
        ours=frozenset(ours),
        third_party=frozenset(_third_party(top_level)),
        anywhere=frozenset(_third_party(anywhere)),
    )


def _third_party(names: Iterable[str]) -> set[str]:
    tops = {n.split(".")[0] for n in names if n}
    return {t for t in tops if t not in sys.stdlib_module_names and t not in OURS} - {"__future__"}


class Graph:
    """The module-level import graph of sqlgate's packages."""

    def __init__(self, root: Path = ROOT) -> None:
        self.paths = modules(root)
        self.imports = {name: imports_of(name, path) for name, path in self.paths.items()}

    def _ours(self, names: Iterable[str]) -> set[str]:
        """The modules of ours that importing ``names`` loads: each name that is a module (not
        an attribute), and every parent package of it."""
        loaded = set()
        for name in names:
            parts = name.split(".")
            for n in range(1, len(parts) + 1):
                candidate = ".".join(parts[:n])
                if candidate in self.paths:
                    loaded.add(candidate)
        return loaded

    @cache  # noqa: B019 - one graph per test session; the cache lives as long as it
    def loads(self, module: str) -> frozenset[str]:
        """Every module of ours that importing ``module`` loads, ``module`` included."""
        seen = {module}
        todo = [module]
        while todo:
            current = todo.pop()
            for other in self._ours([current, *self.imports[current].ours]):
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return frozenset(seen)

    def needs(self, module: str) -> frozenset[str]:
        """The third-party top-level modules that importing ``module`` imports."""
        return frozenset(
            top for loaded in self.loads(module) for top in self.imports[loaded].third_party
        )


def declared(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, list[Requirement]]:
    """Each install's declared requirements, with ``sqlgate[...]`` self-references expanded."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]

    def expand(requirements: list[str], seen: frozenset[str]) -> list[Requirement]:
        out = []
        for text in requirements:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == "sqlgate":
                for extra in sorted(requirement.extras - seen):
                    out += expand(extras[extra], seen | {extra})
            else:
                out.append(requirement)
        return out

    base = expand(project["dependencies"], frozenset())
    result = {"base": base}
    for extra in extras:
        result[extra] = base + expand(extras[extra], frozenset({extra}))
    return result


def closure(requirements: Iterable[Requirement]) -> frozenset[str]:
    """The distributions (canonical names) that installing ``requirements`` brings, as their
    installed metadata here says (markers evaluated for this interpreter)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo = [(r, frozenset[str]()) for r in requirements]
    while todo:
        requirement, _ = todo.pop()
        name = canonicalize_name(requirement.name)
        key = (name, frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        names.add(name)
        try:
            needed = md.requires(name) or []
        except md.PackageNotFoundError:
            raise LookupError(
                f"{name} is declared but not installed here; install '.[test]' first"
            ) from None
        for text in needed:
            sub = Requirement(text)
            environments = [{"extra": e} for e in requirement.extras] or [{"extra": ""}]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in environments):
                todo.append((sub, frozenset()))
    return frozenset(names)


@cache
def _providers() -> dict[str, frozenset[str]]:
    return {
        top: frozenset(canonicalize_name(d) for d in dists)
        for top, dists in md.packages_distributions().items()
    }


def providers(top: str) -> frozenset[str]:
    """The distributions that install the top-level module ``top``."""
    return _providers().get(top, frozenset())


def extra_of(module: str) -> str:
    """The install a module belongs to: an extra (``EXTRA_MODULES``) or ``base``."""
    for prefix, extra in EXTRA_MODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return extra
    return "base"


def reach(graph: Graph, install: str) -> list[str]:
    """The modules ``install`` must import: those of the base and of the install's extras
    (``mcp`` brings ``server``), sorted."""
    owners = {"base", install}
    if install == "mcp":
        owners.add("server")
    return sorted(module for module in graph.paths if extra_of(module) in owners)


def unmet(graph: Graph, module: str, packages: frozenset[str]) -> list[str]:
    """The third-party modules ``module`` imports that none of ``packages`` provides."""
    return sorted(top for top in graph.needs(module) if not providers(top) & packages)
