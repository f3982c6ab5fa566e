"""The pytest plugin, used as a user would: a project of their own with an eval file, recorded
cassettes and a test that asks the ``sqlgate_replay`` fixture, run by pytest in a subprocess.

The cassettes are the committed demo recordings (the scripted server's replies, not a model's).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.conftest import ROOT

PLUGIN = "orchestrator.features.eval.pytest_plugin"

USER_TEST = """
def test_golden_questions(sqlgate_replay):
    report = sqlgate_replay("questions.yaml", "cassettes", db="sqlite:///{db}")
    assert report.totals.replay_misses == 0
    assert report.totals.execution_accuracy >= {floor}
"""


def _plugin_args() -> list[str]:
    """``-p PLUGIN`` unless the installed distribution already registers it (entry point)."""
    registered = any(ep.value == PLUGIN for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", PLUGIN]


def _user_project(tmp_path: Path, demo_db: Path, floor: float, question_file: str) -> Path:
    project = tmp_path / "analytics"
    project.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "eval" / question_file, project / "questions.yaml")
    shutil.copytree(ROOT / "cassettes" / "eval_demo", project / "cassettes")
    (project / "test_golden.py").write_text(USER_TEST.format(db=demo_db, floor=floor))
    return project


def _pytest(project: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "SQLGATE_STATE_DIR": str(tmp_path / "state"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args()],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_users_golden_questions_replay_through_the_fixture(tmp_path: Path, demo_db: Path) -> None:
    project = _user_project(tmp_path, demo_db, 0.6, "demo.yaml")
    done = _pytest(project, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_the_fixture_fails_the_users_test_when_accuracy_drops(
    tmp_path: Path, demo_db: Path
) -> None:
    project = _user_project(tmp_path, demo_db, 0.9, "demo.yaml")
    done = _pytest(project, tmp_path)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "execution_accuracy" in done.stdout and "1 failed" in done.stdout


def test_the_plugin_is_declared_and_light_at_import() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["pytest11"] == {"sqlgate": PLUGIN}
    probe = (
        f"import sys, json; import {PLUGIN}; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = set(__import__("json").loads(done.stdout))
    heavy = {"openai", "httpx2", "sqlalchemy", "sqlglot", "vcr", "yaml", "pydantic", "rich"}
    assert loaded & heavy == set()


@pytest.mark.parametrize("missing", ["cassettes", "questions"])
def test_a_missing_folder_or_file_is_one_sentence(
    tmp_path: Path, demo_db: Path, missing: str
) -> None:
    from orchestrator.core.errors import ConfigurationError
    from orchestrator.features.eval.replay import replay_eval

    questions = ROOT / "tests" / "fixtures" / "eval" / "demo.yaml"
    cassettes = ROOT / "cassettes" / "eval_demo"
    with pytest.raises(ConfigurationError) as caught:
        replay_eval(
            tmp_path / "absent.yaml" if missing == "questions" else questions,
            tmp_path / "absent" if missing == "cassettes" else cassettes,
            db=f"sqlite:///{demo_db}",
        )
    assert str(tmp_path) in caught.value.message and "\n" not in caught.value.message
