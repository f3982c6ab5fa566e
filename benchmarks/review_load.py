"""Benchmark: how much review work earned auto-approval saves on Spider dev, and that it never
auto-approves a template nobody approved.

Run: .venv/bin/python benchmarks/review_load.py [--min-approvals 1] [--min-reviewers 1]

The 1,034 Spider dev questions are replayed in order. Each question's gold SQL stands in for the
model's statement (what the scripted model would return), and goes through what the pipeline
does after Batch 2: the safety validator (the database's schema from ``tables.json``, the default
policy), the real ``ApprovalGate`` with ``EarnedAutoApproval`` on reviewed-SQL memory (a SQLite
state database), and — when the gate asks — a reviewer who approves; each approved statement is
then recorded as the execution stage records it. Reviewers take turns from a pool of
``--reviewers`` names. What this replay does NOT do: call a model (no Batch 1/2 request is
made), or run the SQL (the Spider databases are not loaded; every approved statement is taken to
have run without error).

Printed: statements the validator refused, auto-approved, and still needing a human (share of
the accepted ones); and the number of auto-approvals whose template had never been approved by
a human before in the replay (must be 0).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from approvals import ApprovalGate, ApprovalItem, ItemCategory  # noqa: E402
from approvals.policy import EarnedApprovalRule  # noqa: E402
from orchestrator.core.state_db import StateDatabase  # noqa: E402
from orchestrator.features.memory import (  # noqa: E402
    MemoryScope,
    MemorySettings,
    MemoryStore,
    ReviewMemory,
)
from safety import Policy, SqlValidator  # noqa: E402

CORPORA = ROOT.parent / "shared" / "corpora"


def schemas() -> dict[str, dict[str, list[tuple[str, str]]]]:
    """db_id -> {table: [(column, type)]} from Spider's tables.json."""
    out: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for db in json.loads((CORPORA / "spider_dev" / "tables.json").read_text()):
        tables: dict[str, list[tuple[str, str]]] = {t: [] for t in db["table_names_original"]}
        names = db["table_names_original"]
        for (table, column), kind in zip(
            db["column_names_original"], db["column_types"], strict=True
        ):
            if table >= 0:
                tables[names[table]].append((column, kind))
        out[db["db_id"]] = tables
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-approvals", type=int, default=1)
    parser.add_argument("--min-reviewers", type=int, default=1)
    parser.add_argument("--reviewers", type=int, default=3, help="size of the reviewer pool")
    args = parser.parse_args()
    dev = json.loads((CORPORA / "spider_dev" / "dev.json").read_text())
    all_schemas = schemas()
    policy = Policy().safety_policy()  # the default policy, as `ask` without --policy
    rule = EarnedApprovalRule(
        enabled=True, min_approvals=args.min_approvals, min_reviewers=args.min_reviewers
    )
    counts: Counter[str] = Counter()
    approved_templates: dict[str, set[str]] = {}
    unearned = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        state = StateDatabase(f"sqlite:///{Path(folder) / 'state.sqlite'}")
        state.setup()
        memory = ReviewMemory(state.store(MemoryStore), MemorySettings(auto_approval=rule))
        scopes: dict[str, tuple[MemoryScope, SqlValidator, ApprovalGate]] = {}
        turn = 0
        for entry in dev:
            db_id = entry["db_id"]
            if db_id not in scopes:
                columns = all_schemas[db_id]
                scope = MemoryScope.of(
                    f"spider:{db_id}", "sqlite", columns, policy.model_dump(mode="json")
                )
                validator = SqlValidator(dialect="sqlite", policy=policy, schema=scope.schema)
                gate = ApprovalGate(
                    reviewer=None,
                    validate=validator.validate,
                    policy=memory.auto_approval(scope),
                )
                scopes[db_id] = (scope, validator, gate)
            scope, validator, gate = scopes[db_id]
            verdict = validator.validate(entry["query"])
            if not verdict.ok or verdict.sql is None:
                counts["refused by the validator"] += 1
                continue
            item = ApprovalItem.new(
                question_id=f"q{turn}", question=entry["question"], sql=verdict.sql
            )
            batch = gate.open([item])
            category = batch.categories[item.call_id]
            template = memory.template(batch.items[0].sql, "sqlite")
            seen = approved_templates.setdefault(db_id, set())
            if category is ItemCategory.AUTO_APPROVED:
                counts["auto-approved"] += 1
                unearned += template not in seen
                continue
            if category is ItemCategory.DENIED:
                counts["denied at the gate"] += 1
                continue
            counts["needed a human"] += 1
            reviewer = f"reviewer{turn % args.reviewers + 1}"
            turn += 1
            outcome = gate.submit(batch.batch_id, {item.call_id: "approve"}, actor=reviewer)
            sql = outcome.runnable(item.call_id)
            memory.record(
                scope,
                question=entry["question"],
                sql=sql,
                status="approved",
                reviewers=[reviewer],
                call_id=item.call_id,
            )
            seen.add(template)
        state.close()
    seconds = time.perf_counter() - started
    accepted = counts["auto-approved"] + counts["needed a human"]
    print(
        f"Spider dev replay, {len(dev)} questions in order, earned auto-approval at "
        f"min_approvals={args.min_approvals}, min_reviewers={args.min_reviewers} "
        f"({args.reviewers} reviewers taking turns); {seconds:.1f} s"
    )
    for what, n in sorted(counts.items()):
        print(f"  {what}: {n}")
    print(
        f"  still needing a human: {counts['needed a human']} of {accepted} accepted statements "
        f"({counts['needed a human'] / accepted:.1%})"
    )
    print(f"  auto-approvals of a template no human had approved: {unearned}")


if __name__ == "__main__":
    main()
