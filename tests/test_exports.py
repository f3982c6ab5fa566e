"""Each package's public surface: a sorted ``__all__`` whose every name exists."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["orchestrator", "agents", "safety", "ratelimit", "approvals"])
def test_all_is_sorted_and_importable(package: str) -> None:
    module = importlib.import_module(package)
    exported = module.__all__
    assert exported == sorted(exported)
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert hasattr(module, name), f"{package}.{name} is exported but missing"


def test_nothing_outside_orchestrator_imports_openai() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    offenders = [
        str(path.relative_to(root))
        for package in ("agents", "safety", "ratelimit", "approvals")
        for path in (root / package).rglob("*.py")
        if "import openai" in path.read_text() or "from openai" in path.read_text()
    ]
    assert offenders == []


def test_no_exception_class_name_is_defined_twice() -> None:
    """One exception root per package and no duplicate names across them: ``except RunNotFound``
    means one thing wherever it is written."""
    import ast
    from collections import defaultdict
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    where: dict[str, list[str]] = defaultdict(list)
    for package in ("orchestrator", "agents", "safety", "ratelimit", "approvals"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name)
                    and (base.id.endswith(("Error", "Exception")) or base.id in where)
                    for base in node.bases
                ):
                    where[node.name].append(str(path.relative_to(root)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert twice == {}


def test_the_lazy_export_helper_examples_run() -> None:
    import doctest

    import sqlgate_exports

    result = doctest.testmod(sqlgate_exports, optionflags=doctest.ELLIPSIS)
    assert result.attempted and result.failed == 0


@pytest.mark.parametrize("package", ["orchestrator", "agents", "safety", "ratelimit", "approvals"])
def test_an_unknown_name_is_an_attribute_error_and_dir_lists_the_exports(package: str) -> None:
    module = importlib.import_module(package)
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'NoSuchName'"):
        module.NoSuchName  # noqa: B018 - the lookup is the test
    assert set(module.__all__) <= set(dir(module))
