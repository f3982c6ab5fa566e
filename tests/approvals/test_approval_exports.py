"""The public surface: sorted ``__all__``, error codes, runnable docstring examples."""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest

import approvals
import approvals.errors

MODULES = [
    "approvals",
    "approvals.envelope",
    "approvals.expiry",
    "approvals.models",
    "approvals.notify",
    "approvals.policy",
    "approvals.reviewers",
    "approvals.risk",
    "approvals.service",
    "approvals.sql_store",
]


def test_all_is_sorted_and_complete():
    assert approvals.__all__ == sorted(approvals.__all__)
    for name in approvals.__all__:
        assert hasattr(approvals, name), name


def test_every_error_has_a_snake_case_code():
    errors = [
        obj
        for obj in vars(approvals.errors).values()
        if inspect.isclass(obj) and issubclass(obj, approvals.ApprovalError)
    ]
    assert len(errors) >= 10
    for error in errors:
        assert error.code.isidentifier() and error.code == error.code.lower(), error
        assert error.__name__ in approvals.errors.__doc__, error
        assert error.__name__ in approvals.__all__


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
