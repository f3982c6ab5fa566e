"""Seeding memory from a file of (question, SQL) pairs, each one checked before it is accepted.

Every SQL is validated under the safety policy the pipeline uses and executed once, read-only,
on the target database; only then is it stored (status ``seeded``, the person who added it as
its reviewer). A refused pair is reported with the validator's or the database's reason and
nothing is stored for it. Seeded pairs serve as examples; they are never evidence for earned
auto-approval, which counts only approvals given at the gate.

Files: CSV with a header naming ``question`` and ``sql`` columns, or JSON Lines with those keys.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agents import ExecutionError, SQLExecutor
from orchestrator.features.memory.errors import SeedRefused
from orchestrator.features.memory.models import MemoryExample
from orchestrator.features.memory.review_memory import MemoryScope, ReviewMemory
from safety import SqlValidator

__all__ = ["SeedOutcome", "SeedPair", "read_pairs", "seed_pairs"]


@dataclass(frozen=True)
class SeedPair:
    """One line of a seed file: where it was, the question and the SQL."""

    line: int
    question: str
    sql: str


@dataclass(frozen=True)
class SeedOutcome:
    """What became of one pair: the stored example, or why it was refused."""

    pair: SeedPair
    example: MemoryExample | None
    refusal: str | None
    code: str | None = None


def read_pairs(path: Path) -> list[SeedPair]:
    """The pairs of a ``.csv`` or ``.jsonl`` file; raises ``SeedRefused`` when it is unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SeedRefused(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        at = exc.object[: exc.start].count(b"\n") + 1
        raise SeedRefused(
            f"{path}:{at}: not UTF-8 text (byte {exc.start}): save the file as UTF-8"
        ) from None
    rows: list[tuple[int, dict[str, object]]] = []
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        fields = {f.strip().lower() for f in reader.fieldnames or ()}
        if not {"question", "sql"} <= fields:
            raise SeedRefused(f"{path}: the CSV header must name the columns question and sql")
        for n, row in enumerate(reader, start=2):
            rows.append((n, {k.strip().lower(): v for k, v in row.items() if k}))
    else:
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SeedRefused(f"{path}:{n}: not JSON ({exc.msg})") from exc
            if not isinstance(value, dict):
                raise SeedRefused(f"{path}:{n}: expected an object with question and sql")
            rows.append((n, value))
    pairs = []
    for n, row in rows:
        question, sql = str(row.get("question") or "").strip(), str(row.get("sql") or "").strip()
        if not question or not sql:
            raise SeedRefused(f"{path}:{n}: both question and sql are needed")
        pairs.append(SeedPair(n, question, sql))
    return pairs


def seed_pairs(
    memory: ReviewMemory,
    scope: MemoryScope,
    pairs: Sequence[SeedPair],
    *,
    validator: SqlValidator,
    executor: SQLExecutor,
    actor: str,
) -> list[SeedOutcome]:
    """Validate, run once read-only, and store each pair; refused pairs store nothing."""
    outcomes = []
    for pair in pairs:
        verdict = validator.validate(pair.sql)
        if not verdict.ok or verdict.sql is None:
            refusal = verdict.refusal
            outcomes.append(
                SeedOutcome(
                    pair,
                    None,
                    refusal.message if refusal else "refused by the validator",
                    refusal.code if refusal else "refused",
                )
            )
            continue
        try:
            executor.run(verdict)
        except ExecutionError as exc:
            outcomes.append(SeedOutcome(pair, None, exc.message, exc.code))
            continue
        example = memory.record(
            scope, question=pair.question, sql=verdict.sql, status="seeded", reviewers=[actor]
        )
        outcomes.append(SeedOutcome(pair, example, None))
    return outcomes
