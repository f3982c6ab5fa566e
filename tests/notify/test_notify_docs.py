"""The notification modules' docstring examples run, and the package's surface is sorted."""

from __future__ import annotations

import doctest
import importlib

import pytest

import orchestrator.notify

MODULES = [
    "orchestrator.explain",
    "orchestrator.notify.channels",
    "orchestrator.notify.messages",
    "orchestrator.notify.notifier",
    "orchestrator.notify.signing",
    "orchestrator.risk",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    failed, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failed == 0


def test_all_is_sorted_and_importable() -> None:
    exported = orchestrator.notify.__all__
    assert exported == sorted(exported)
    assert all(hasattr(orchestrator.notify, name) for name in exported)
