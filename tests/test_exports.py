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
