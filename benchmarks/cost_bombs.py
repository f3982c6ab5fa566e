"""What a hostile model's cost bombs cost: wall time and memory of the whole sqlgate process tree.

For each of the five bombs of SQLite and of DuckDB (``tests/orchestrator/cost_bombs.py``: a
backtracking pattern, a huge string, a huge list, ``range`` / ``zeroblob``, a string
aggregation), the "model" (sqlgate's scripted OpenAI-compatible server over local HTTP, NOT a
live model) answers with the bomb, and ``sqlgate ask QUESTION --yes --timeout T`` runs it with
the risk step on (it always is): the plan estimate before review, then execution when the
statement is approved. Each run is a fresh process, measured from outside (a harmless statement
first, per engine, shows what start-up alone costs on the machine):

- wall time of the command;
- the sqlgate process's own peak resident size (``VmHWM``, sampled from ``/proc``);
- the tree: every process's peak (sqlgate and its sandbox workers, each sampled), summed, an
  upper bound of the tree at any moment; and the largest single peak of any of them
  (``wait4``'s ``ru_maxrss``, which sampling cannot miss).

A run passes when it ends within ``--max-wall`` seconds (12) with the tree's summed peak within
``--max-rss-gb`` (1.5) and no traceback.

    nice -n 10 python benchmarks/cost_bombs.py [--timeout 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.orchestrator.cost_bombs import (  # noqa: E402
    BOMBS,
    QUESTION,
    fill,
    measure,
    question_for,
)
from tests.scripted_llm.scenarios import Scenario, ScenarioScript, reasoning  # noqa: E402
from tests.scripted_llm.server import ScriptedLLMServer  # noqa: E402

ENGINES = ("sqlite", "duckdb")
HARMLESS = "SELECT c.name FROM customers AS c ORDER BY c.id"  # the machine's own start, for scale
MB = 1024 * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=2.0, help="statement timeout, seconds")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each bomb")
    parser.add_argument("--max-wall", type=float, default=12.0)
    parser.add_argument("--max-rss-gb", type=float, default=1.5)
    args = parser.parse_args()
    limit = int(args.max_rss_gb * 1024 * MB)
    # A hostile model answers a correction request with its bomb again.
    scenarios = {
        question_for(name): Scenario(
            reasoning=reasoning(tables=["customers"]), sql=sql, corrections=[sql, sql]
        )
        for engine in ENGINES
        for name, sql in BOMBS[engine].items()
    }
    scenarios[QUESTION] = Scenario(reasoning=reasoning(tables=["customers"]), sql=HARMLESS)
    passed: dict[str, int] = dict.fromkeys(ENGINES, 0)
    total: dict[str, int] = dict.fromkeys(ENGINES, 0)
    print(
        "Model: sqlgate's scripted OpenAI-compatible server (tests/scripted_llm) over local "
        "HTTP; NOT a live model."
    )
    print(
        f"sqlgate ask --yes --timeout {args.timeout:g}; risk step on; {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    print(
        f"{'engine':8} {'bomb':12} {'status':18} {'corr':>4} {'wall s':>7} {'+harmless':>9} "
        f"{'sqlgate MB':>10} "
        f"{'tree MB':>8} {'largest MB':>10}  verdict"
    )
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLMServer(ScenarioScript(scenarios)) as llm:
        work = Path(tmp)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "scripted",
            "SQLGATE_MODEL": "scripted-model",
            "SQLGATE_RATE_LIMIT": "1000/60",
            "SQLGATE_RATE_BACKEND": "memory",
            "SQLGATE_STATE_URL": f"sqlite:///{work / 'state.sqlite3'}",
        }
        for engine in ENGINES:
            url = f"{engine}:///{work / f'shop.{engine}'}"
            fill(url)
            start_s = 0.0
            for name in ["(harmless)", *BOMBS[engine]]:
                question = QUESTION if name == "(harmless)" else question_for(name)
                for _ in range(args.repeat):
                    argv = [sys.executable, "-m", "orchestrator.cli", "ask", question]
                    argv += ["--db", url, "--yes", "--timeout", f"{args.timeout:g}", "--json"]
                    run = measure(argv, env, cwd=ROOT)
                    try:
                        payload = json.loads(run.stdout)
                        status, corrections = str(payload["status"]), int(payload["corrections"])
                    except (ValueError, KeyError):
                        status, corrections = f"exit {run.returncode}", 0
                    ok = (
                        run.wall_s <= args.max_wall
                        and run.tree_peak_rss <= limit
                        and "Traceback" not in run.stderr
                    )
                    if name == "(harmless)":
                        start_s = run.wall_s
                    else:
                        total[engine] += 1
                        passed[engine] += ok
                    print(
                        f"{engine:8} {name:12} {status:18} {corrections:4} {run.wall_s:7.2f} "
                        f"{run.wall_s - start_s:+9.2f} "
                        f"{run.peak_rss / MB:10.0f} {run.tree_peak_rss / MB:8.0f} "
                        f"{run.largest_rss / MB:10.0f}  {'ok' if ok else 'FAIL'}"
                    )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    for engine in ENGINES:
        print(
            f"{engine}: {passed[engine]} of {total[engine]} within {args.max_wall:g} s and "
            f"{args.max_rss_gb:g} GB (tree), no traceback"
        )
    return 0 if passed == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
