"""A process that advances a run, for the kill -9 tests: ``python -m tests.orchestrator.lease_worker``.

    start   RUN_ID QUESTION   run the question (the pipeline pauses at the gate)
    resume  RUN_ID            carry on after a decision
    recover RUN_ID            take over a run whose process stopped

With ``--hold-at STAGE`` the process writes ``--signal`` and then waits (to be killed) as soon as
the pipeline reports that stage; with ``--signal-at STAGE`` it only writes the signal and goes
on. The results are printed as JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from orchestrator.core.database import TargetDatabase
from orchestrator.core.llm import LLMClient, LLMSettings
from orchestrator.core.pipeline import Pipeline, PipelineConfig
from orchestrator.core.state_db import StateDatabase
from ratelimit import SlidingWindowLimiter


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["start", "resume", "recover"])
    parser.add_argument("run_id")
    parser.add_argument("question", nargs="?")
    parser.add_argument("--state", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--hold-at")
    parser.add_argument("--signal-at")
    parser.add_argument("--signal")
    args = parser.parse_args(argv)

    def progress(stage: str, done: int = 0, total: int = 0) -> None:
        if stage in (args.hold_at, args.signal_at) and args.signal:
            Path(args.signal).write_text(stage)
        if stage == args.hold_at:
            while True:  # wait here for SIGKILL
                time.sleep(1)

    state = StateDatabase(args.state)
    state.setup()
    llm = LLMClient(
        LLMSettings(model="sqlgate-scripted", base_url=args.model_url),
        limiter=SlidingWindowLimiter(limit=1000, window=60.0),
    )
    pipeline = Pipeline(
        TargetDatabase(args.db, statement_timeout_s=args.timeout),
        llm,
        None,
        config=PipelineConfig(lease_s=args.lease),
        approval_store=state.approvals,
        run_store=state.runs,
        progress=progress,
    )
    if args.command == "start":
        results = pipeline.run_batch([args.question], run_id=args.run_id)
    elif args.command == "resume":
        results = pipeline.resume(args.run_id)
    else:
        results = pipeline.recover(args.run_id)
    print(json.dumps([r.model_dump(mode="json") for r in results]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
