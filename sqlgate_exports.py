"""How sqlgate's packages export names: on first use, and under a moved module's old path.

``lazy_exports`` answers a package's ``__getattr__`` and ``__dir__`` from its ``{name: module}``
table, so importing the package imports none of its modules until a name is used; each package
imports the same names under ``TYPE_CHECKING`` so type checkers see them. ``warn_moved`` is what
a module left at an old path says when it is imported. Only the standard library is imported
here, so every package (``ratelimit`` and ``safety`` as much as ``orchestrator``) may use it.

Example:
    >>> namespace = {"__name__": "shapes"}
    >>> getattr_, dir_ = lazy_exports("shapes", {"sqrt": "math"}, namespace)
    >>> getattr_("sqrt")(9.0)
    3.0
    >>> "sqrt" in namespace, "sqrt" in dir_()
    (True, True)
    >>> getattr_("cbrt")
    Traceback (most recent call last):
    ...
    AttributeError: module 'shapes' has no attribute 'cbrt'
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module
from types import FrameType

__all__ = ["lazy_exports", "warn_moved"]


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: MutableMapping[str, object]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``exports`` maps each exported name to the
    module that defines it; a name is imported on first use and kept in ``namespace`` (the
    package's ``globals()``), so later uses are plain attribute reads.

    Use it as ``__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())``.
    """

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return __getattr__, __dir__


def warn_moved(old: str, new: str, *, removed_in: str) -> None:
    """Warn (``DeprecationWarning``) that module ``old`` moved to ``new``; called by the module
    left at ``old`` while it is imported. The warning points at the line that imported it, so
    Python's default filters show it when that line is in ``__main__``."""
    warnings.warn(
        f"{old} moved to {new}; the old path is deprecated and will be removed in {removed_in}: "
        f"import from {new}",
        DeprecationWarning,
        stacklevel=_importer_level(),
    )


def _importer_level() -> int:
    """The ``stacklevel`` of the line that imported the module at the old path.

    Levels are counted as ``warnings.warn`` counts them: 1 is ``warn_moved``, 2 the module at the
    old path, and each further level the next frame outside importlib's bootstrap (which
    ``warnings`` skips itself). Loader frames above the bootstrap (``importlib.import_module``,
    a loader's ``exec_module`` such as pytest's assertion rewriter) are passed over too.
    """
    frame: FrameType | None = sys._getframe(2)  # the module at the old path
    level = 2
    while frame is not None:
        frame = frame.f_back
        while frame is not None and _bootstrap(frame):
            frame = frame.f_back
        if frame is None:
            break
        level += 1
        if frame.f_code.co_name not in _LOADER_FUNCTIONS:
            break
    return level


#: Functions that run a module's body for an import statement, above importlib's bootstrap.
_LOADER_FUNCTIONS = frozenset({"exec_module", "load_module", "import_module"})


def _bootstrap(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename
