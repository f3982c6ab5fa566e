"""The notification modules' docstring examples run, and the package's surface is sorted."""

from __future__ import annotations

import doctest
import importlib

import pytest

import orchestrator.features.notify

MODULES = [
    "orchestrator.features.explain",
    "orchestrator.features.notify.channels",
    "orchestrator.features.notify.messages",
    "orchestrator.features.notify.notifier",
    "orchestrator.features.notify.signing",
    "orchestrator.features.risk",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failed, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failed == 0


def test_all_is_sorted_and_importable() -> None:
    exported = orchestrator.features.notify.__all__
    assert exported == sorted(exported)
    assert all(hasattr(orchestrator.features.notify, name) for name in exported)
