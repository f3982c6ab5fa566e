"""The README's example risk policy replayed over Spider dev gold SQL, with one reviewer.

Run: python benchmarks/risk_replay.py [--limit N]

Each Spider dev database is built in SQLite from the corpus (MySQL DDL + CSV), and each gold
statement goes through what a run does before review: the safety validator, then the risk
assessor (SQLite's query plan, the columns read resolved against the real schema) under the
README's ``[risk]`` example (``customers.email``/``customers.phone`` sensitive, high needs 2
reviewers). With one reviewer a statement whose level needs two is not run. Printed: statements
replayed, refused by the validator, levels, statements whose columns could not be resolved,
statements one reviewer cannot run (by reason), and the figure that must be 0: statements
whose columns all resolve, that read no sensitive column, and that one reviewer still cannot run.
Then what one approval per database (``batch --yes``) would lose if a single high statement
held back its whole batch, and what it loses with the approval split by risk level.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlglot  # noqa: E402

from approvals import ApprovalItem, RiskApproval  # noqa: E402
from orchestrator.core.database import TargetDatabase  # noqa: E402
from orchestrator.features.memory.fingerprint import columns_read  # noqa: E402
from orchestrator.features.risk import RiskAssessor, assessor_for, risk_approval  # noqa: E402
from safety import Policy  # noqa: E402
from safety.catalog import SchemaCatalog  # noqa: E402
from safety.resolve import resolve, sqlite_quoted_strings  # noqa: E402
from tests.safety.safety_corpora import load_spider_sqlite  # noqa: E402

CORPORA = ROOT / ".." / "shared" / "corpora"

#: The ``[risk]`` example of the README, as written there.
README_POLICY = """
[risk]
sensitive_columns = ["customers.email", "customers.phone"]
sensitive = "high"
high_rows = 100000
medium_rows = 5000
full_scan = "medium"
row_cap_cut = "medium"
no_estimate = "medium"
auto_approve = ["low"]

[risk.quorum]
high = 2
"""
REVIEWERS = 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="At most this many statements.")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    entries = json.loads((CORPORA / "spider_dev" / "dev.json").read_text())[: args.limit]
    by_db: dict[str, list[str]] = defaultdict(list)
    for entry in entries:
        by_db[entry["db_id"]].append(entry["query"])
    policy = Policy.from_toml_text(README_POLICY)
    rule = risk_approval(policy)
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    batch_whole_lost = batch_split_lost = 0
    with tempfile.TemporaryDirectory() as folder:
        for db_id, queries in sorted(by_db.items()):
            path = load_spider_sqlite(db_id, Path(folder) / f"{db_id}.sqlite")
            if path is None:
                counts["database missing"] += len(queries)
                continue
            database = TargetDatabase(f"sqlite:///{path}", policy=policy)
            validator = database.validator()
            assess = assessor_for(database)
            assert isinstance(assess, RiskAssessor)
            schema = {n.split(".")[-1]: c for n, c in database.resolved_schema().tables.items()}
            catalog = SchemaCatalog(schema, "sqlite")
            sensitive = {s.lower() for s in policy.risk.sensitive_columns}
            held = []
            for query in queries:
                counts["statements"] += 1
                result = validator.validate(query)
                if not result.ok or not result.sql:
                    counts["refused by the validator"] += 1
                    continue
                item = ApprovalItem.new(question_id="q", question="?", sql=result.sql)
                risk = assess(item)
                counts[f"level {risk.level}"] += 1
                _, columns = columns_read(result.sql, "sqlite", schema)
                if columns is None:
                    counts["columns not resolved"] += 1
                # the validator's own resolution, independent of the risk assessor's
                tree = sqlglot.parse_one(result.sql, read="sqlite")
                sqlite_quoted_strings(tree, catalog)  # as the validator reads "strings"
                resolution = resolve(tree, catalog, "sqlite")
                resolved = not resolution.problems
                reads = {f"{c.table}.{c.column}".lower() for c in resolution.columns}
                if _one_reviewer_cannot_run(rule, risk.level):
                    held.append(query)
                    reasons[risk.summary()] += 1
                    if resolved and not reads & sensitive:
                        counts["resolved, not sensitive, yet not run"] += 1
            if held:
                batch_whole_lost += len(queries)
                batch_split_lost += len(held)
            database.dispose()
    for key in (
        "statements",
        "database missing",
        "refused by the validator",
        "level low",
        "level medium",
        "level high",
        "columns not resolved",
    ):
        print(f"{key:<45} {counts[key]}")
    print(f"{'one reviewer cannot run':<45} {sum(reasons.values())}")
    for why, n in reasons.most_common():
        print(f"    {n:>4}  {why}")
    print(
        f"{'resolved, not sensitive, yet not run':<45} "
        f"{counts['resolved, not sensitive, yet not run']}  (must be 0)"
    )
    print(f"{'batch --yes, one approval per database':<45} {batch_whole_lost} not run")
    print(f"{'batch --yes, approval split by risk level':<45} {batch_split_lost} not run")


def _one_reviewer_cannot_run(rule: RiskApproval, level: str) -> bool:
    return rule.quorum_for(level) > REVIEWERS


if __name__ == "__main__":
    main()
