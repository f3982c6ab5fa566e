"""The examples in the safety package's docstrings run as doctests."""

import doctest
import importlib

import pytest

MODULES = [
    "safety.access",
    "safety.catalog",
    "safety.dialect_rules",
    "safety.dialects",
    "safety.errors",
    "safety.functions",
    "safety.name_rules",
    "safety.node_labels",
    "safety.policy",
    "safety.policy_file",
    "safety.readonly",
    "safety.resolve",
    "safety.resolve_fast",
    "safety.schema_reader",
    "safety.validator",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
