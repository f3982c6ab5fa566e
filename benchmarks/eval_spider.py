"""``sqlgate eval`` on Spider dev through the scripted server: record, then replay, compared.

The "model" is sqlgate's scripted OpenAI-compatible server (tests/scripted_llm) answering every
question with its GOLD SQL (``tests/scripted_llm/gold.py``): the accuracy printed is the
script's, NOT a model's. What it measures is what the pipeline does to a right statement
(validation rewrites, the row cap, approval, execution) and what an eval costs in calls, tokens
and time, recorded and then replayed with no model. The Spider databases are built as SQLite in a
temporary folder from the corpus's CSV data (Spider's layout: NAME/NAME.sqlite); dev.json is read
as it is. Both runs go through the real CLI, each in its own process.

    python benchmarks/eval_spider.py [--per-db 5] [--db-id concert_singer ...]
    python benchmarks/eval_spider.py --per-db 2 --db-id concert_singer --db-id pets_1 \\
        --cassettes cassettes/eval_spider          # re-record the committed cassettes

It prints, for record and replay: questions, execution accuracy, statuses, LLM calls, tokens,
wall time, and whether the two reports are equal apart from timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orchestrator.features.eval.report import read_report  # noqa: E402
from tests.safety.safety_corpora import CORPORA, load_spider_sqlite  # noqa: E402
from tests.scripted_llm.gold import GoldScript  # noqa: E402
from tests.scripted_llm.server import ScriptedLLMServer  # noqa: E402

SQLGATE = [sys.executable, "-m", "orchestrator.cli"]
DEV = CORPORA / "spider_dev" / "dev.json"
SCRIPTED_MODEL = "sqlgate-scripted-gold"


def build_databases(target: Path, names: set[str]) -> list[str]:
    """Spider's layout under ``target``: NAME/NAME.sqlite for each database the corpus has."""
    built = []
    for name in sorted(names):
        folder = target / name
        folder.mkdir(parents=True, exist_ok=True)
        if load_spider_sqlite(name, folder / f"{name}.sqlite") is not None:
            built.append(name)
    return built


def run_eval(args: list[str], env: dict[str, str]) -> tuple[int, float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [*SQLGATE, "eval", *args], env=env, capture_output=True, text=True, check=False
    )
    return done.returncode, time.perf_counter() - started, done.stderr


def record_and_replay(
    dev: Path, db_dir: Path, cassettes: Path, work: Path, selection: list[str]
) -> dict[str, object]:
    """Record ``dev``'s selected questions against the gold script, replay them, compare."""
    entries = json.loads(dev.read_text())
    gold = {e["question"]: e["query"] for e in entries}
    env = {**os.environ, "SQLGATE_STATE_DIR": str(work / "state"), "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_API_KEY", None)
    common = [str(dev), "--db-dir", str(db_dir), "--approve-all", *selection]
    with ScriptedLLMServer(GoldScript(gold)) as server:
        live_env = {**env, "OPENAI_BASE_URL": server.base_url, "SQLGATE_MODEL": SCRIPTED_MODEL}
        code, record_s, stderr = run_eval(
            [
                *common,
                "--record",
                str(cassettes),
                "--rate-limit",
                "100000/60",
                "--out",
                str(work / "record.json"),
            ],
            live_env,
        )
        if code != 0:
            raise SystemExit(f"record failed ({code}):\n{stderr}")
    env.pop("OPENAI_BASE_URL", None)
    code, replay_s, stderr = run_eval(
        [*common, "--replay", str(cassettes), "--out", str(work / "replay.json")], env
    )
    if code != 0:
        raise SystemExit(f"replay failed ({code}):\n{stderr}")
    recorded = read_report(work / "record.json")
    replayed = read_report(work / "replay.json")
    return {"record": recorded, "replay": replayed, "record_s": record_s, "replay_s": replay_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-db", type=int, default=5, help="questions per database")
    parser.add_argument("--db-id", action="append", default=[], help="only these databases")
    parser.add_argument("--cassettes", type=Path, help="keep the cassettes here (replaced)")
    options = parser.parse_args()
    if not DEV.is_file():
        raise SystemExit(f"{DEV} is absent: the Spider corpus is needed")
    names = {e["db_id"] for e in json.loads(DEV.read_text())}
    wanted = set(options.db_id) or names
    with tempfile.TemporaryDirectory(prefix="sqlgate-eval-spider-") as tmp:
        work = Path(tmp)
        built = build_databases(work / "database", wanted & names)
        selection = ["--per-db", str(options.per_db)]
        for name in built:
            selection += ["--db-id", name]
        cassettes = options.cassettes or work / "cassettes"
        if options.cassettes is not None and cassettes.exists():
            shutil.rmtree(cassettes)
        out = record_and_replay(DEV, work / "database", cassettes, work, selection)
    recorded, replayed = out["record"], out["replay"]
    same = recorded.comparable() == replayed.comparable()  # type: ignore[attr-defined]
    print(f"Spider dev, {len(built)} database(s), at most {options.per_db} question(s) each")
    print("scripted gold-SQL replies (NOT a model): the accuracy is the script's")
    for name in ("record", "replay"):
        report = out[name]
        t = report.totals  # type: ignore[attr-defined]
        print(
            f"{name:7s} questions {t.questions}  accuracy {t.execution_accuracy:.1%}  "
            f"correct {t.correct} wrong {t.wrong} not answered {t.not_answered} "
            f"gold errors {t.gold_errors}  statuses {t.statuses}  LLM calls {t.llm_calls}  "
            f"tokens {t.prompt_tokens + t.completion_tokens}  wall {out[name + '_s']:.1f} s"
        )
    print(f"reports equal apart from timing: {same}")
    wrong = [q for q in recorded.questions if q.outcome != "correct"]  # type: ignore[attr-defined]
    for q in wrong[:20]:
        print(
            f"  {q.id} {q.db.rsplit('/', 1)[-1]} {q.outcome} {q.status} {q.error_code or ''} {q.note or ''}"
        )


if __name__ == "__main__":
    main()
