"""Modules that moved keep their old path for one release: importing it warns, naming the new
path, and gives the very objects the new module holds (``CHANGELOG.md``, Deprecated)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from sqlgate_exports import warn_moved

ROOT = Path(__file__).resolve().parent.parent

#: Old path -> new path, for every module left at its old path.
MOVED_MODULES = {
    "orchestrator.chart": "orchestrator.features.chart",
    "orchestrator.database": "orchestrator.core.database",
    "orchestrator.memory": "orchestrator.features.memory",
    "orchestrator.notify": "orchestrator.features.notify",
    "orchestrator.pipeline": "orchestrator.core.pipeline",
    "orchestrator.telemetry": "orchestrator.core.telemetry",
}


def _import_afresh(name: str) -> tuple[object, list[warnings.WarningMessage]]:
    sys.modules.pop(name, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, [w for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_the_old_path_warns_and_names_the_new_modules_objects(old: str, new: str) -> None:
    module, caught = _import_afresh(old)
    assert [str(w.message) for w in caught] == [
        f"{old} moved to {new}; the old path is deprecated and will be removed in 0.2.0: "
        f"import from {new}"
    ]
    assert caught[0].filename == __file__  # the line that imported it, not importlib's
    moved = importlib.import_module(new)
    exported = module.__all__  # type: ignore[attr-defined]
    assert exported and set(exported) <= set(dir(moved))
    if hasattr(moved, "__all__"):
        assert exported == list(moved.__all__)
    for name in exported:
        assert getattr(module, name) is getattr(moved, name), name


def test_the_documented_names_resolve_by_their_old_paths() -> None:
    """The names the README gave with the old paths."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from orchestrator.chart import choose_chart
        from orchestrator.database import TargetDatabase
        from orchestrator.memory import memory_for
        from orchestrator.notify import verify
        from orchestrator.pipeline import Pipeline, PipelineConfig
        from orchestrator.telemetry import use_tracer_provider
    from orchestrator.core.database import TargetDatabase as Moved

    assert TargetDatabase is Moved
    assert all(
        callable(f)
        for f in (choose_chart, memory_for, verify, Pipeline, PipelineConfig, use_tracer_provider)
    )


def test_python_shows_the_warning_to_a_script_by_default() -> None:
    """Under Python's default filters a ``DeprecationWarning`` is shown only when it is
    attributed to ``__main__``: the warning points at the importing line, so a script sees it."""
    done = subprocess.run(
        [sys.executable, "-c", "import orchestrator.pipeline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "DeprecationWarning: orchestrator.pipeline moved to orchestrator.core.pipeline" in (
        done.stderr
    )


def test_a_warning_from_a_plain_call_points_past_the_caller() -> None:
    """Called outside an import, ``warn_moved`` still attributes the warning to a real frame."""

    def module_body() -> None:
        warn_moved("old.place", "new.place", removed_in="0.2.0")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module_body()
    assert [str(w.message) for w in caught] == [
        "old.place moved to new.place; the old path is deprecated and will be removed in 0.2.0: "
        "import from new.place"
    ]
    assert caught[0].filename == __file__


def test_the_changelog_records_every_old_path() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    deprecated = text.split("### Deprecated", 1)[1].split("### ", 1)[0]
    for old, new in MOVED_MODULES.items():
        assert f"`{old}` -> `{new}`" in deprecated, old
