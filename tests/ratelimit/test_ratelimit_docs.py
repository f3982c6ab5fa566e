"""Every ``Example:`` in the package's docstrings runs."""

import doctest
import importlib
import pkgutil

import pytest

import ratelimit

MODULES = sorted(
    ["ratelimit"]
    + [info.name for info in pkgutil.walk_packages(ratelimit.__path__, prefix="ratelimit.")]
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:  # an optional driver that is not installed
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
