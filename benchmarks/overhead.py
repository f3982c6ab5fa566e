"""Benchmark 4: the orchestrator's own time per question, against running the final SQL alone.

Run: .venv/bin/python benchmarks/overhead.py [--quick] [--repeat N]

The model is scripted and answers at once (local HTTP, no added latency), so what remains is
sqlgate's own work: building prompts, the ``openai`` client and its HTTP round trip, parsing,
schema and data exploration, validation, the approval gate (``ApproveAll``), execution, result
checks. The database is the demo SQLite file.

Per question (one ``ask`` each, after one warm-up ask so the schema cache is warm), the time is
split by the trace's per-agent durations (the four Batch-1 agents share one call, counted once);
what the trace does not cover (building prompts and catalogues outside the timed call, the
approval gate, run bookkeeping) is the remainder. A second
table splits the same runs by the pipeline's progress callback: each stage's span runs from its
first progress event to the next stage's (so the validator falls in "writing SQL", whose last event
comes before it). Then a batch of 50 questions (k = 10) split the same way, per question.

The reference is the same final SQL run alone through a plain SQLAlchemy connection on the same
file, timed in the same loop (interleaved with the asks so machine load hits both alike).
Figures are medians in milliseconds. ``--quick`` repeats 5 times instead of 20.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import _harness as h
import sqlalchemy as sa

from tests.scripted_llm.scenarios import ORDERS_BY_SEGMENT, TOP_CATEGORIES

LLM_AGENTS = {
    "IntentAnalyzer": "Batch 1 call (reasoning)",
    "SQLGenerator": "Batch 2 call (SQL)",
    "SelfCorrection": "Batch 3 call (correction)",
    "ResponseSynthesizer": "Batch 4 call (answer)",
}
REASONING = {"IntentAnalyzer", "ClarificationAgent", "QueryDecomposer", "QueryPlanner"}
TRACE_STAGES = [
    "Batch 1 call (reasoning)",
    "SchemaExplorer",
    "DataExplorer",
    "Batch 2 call (SQL)",
    "SafetyValidator",
    "SQLExecutor",
    "Batch 3 call (correction)",
    "ResultValidator",
    "Batch 4 call (answer)",
]
PROGRESS_STAGES = [
    "(before the first stage)",
    "reasoning",
    "exploring schema",
    "writing SQL",
    "waiting for approval",
    "running SQL",
    "correcting SQL",
    "writing the answer",
    "(after)",
]

CASES = [
    ("simple count, 1 table", h.GENERATED_QUESTIONS[0]),
    ("count with data context", h.GENERATED_QUESTIONS[24]),
    ("count over a join", h.GENERATED_QUESTIONS[28]),
    ("top 5 over 4 tables", TOP_CATEGORIES),
    ("one correction", ORDERS_BY_SEGMENT),
]


class ProgressClock:
    """Records ``(time, stage)`` for every progress event."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []

    def __call__(self, stage: str, done: int = 0, total: int = 0) -> None:
        self.events.append((time.perf_counter(), stage))

    def spans(self, start: float, end: float) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        marks = [(start, PROGRESS_STAGES[0])] + self.events + [(end, PROGRESS_STAGES[-1])]
        for (t, stage), (t_next, _) in zip(marks, marks[1:], strict=False):
            out[stage] += (t_next - t) * 1000.0
        self.events = []
        return out


def trace_split(result) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for entry in result.trace:
        if entry.agent in REASONING and entry.agent != "IntentAnalyzer":
            continue  # the same call as IntentAnalyzer's
        out[LLM_AGENTS.get(entry.agent, entry.agent)] += entry.duration_ms
    return out


def sql_alone(engine: sa.Engine, sql: str) -> float:
    started = time.perf_counter()
    with engine.connect() as connection:
        connection.execute(sa.text(sql)).fetchall()
    return (time.perf_counter() - started) * 1000.0


def med(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 repetitions instead of 20")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    repeat = args.repeat or (5 if args.quick else 20)

    h.header(
        "Benchmark 4: orchestrator overhead per question (zero-latency scripted model, demo SQLite)"
    )
    db = h.demo_database()
    plain = sa.create_engine(f"sqlite:///{db}")
    progress = ProgressClock()
    summary, trace_rows, progress_rows = [], [], []
    with h.ScriptedModel() as model:
        p = h.pipeline(db, model.base_url, progress=progress)
        for label, question in CASES:
            first = p.ask(question)  # warm-up: schema cache, connections, JSON schemas
            progress.events = []
            walls, alone, stages, spans = [], [], defaultdict(list), defaultdict(list)
            for _ in range(repeat):
                started = time.perf_counter()
                r = p.ask(question)
                ended = time.perf_counter()
                walls.append((ended - started) * 1000.0)
                for stage, ms in progress.spans(started, ended).items():
                    spans[stage].append(ms)
                split = trace_split(r)
                for stage in TRACE_STAGES:
                    stages[stage].append(split.get(stage, 0.0))
                stages["remainder (prompts, approval gate, bookkeeping)"].append(
                    walls[-1] - sum(split.values())
                )
                alone.append(sql_alone(plain, r.sql))
            assert r.status.value == "answered" and first.sql == r.sql, (label, r.status, r.error)
            wall, base = med(walls), med(alone)
            llm = sum(med(stages[s]) for s in TRACE_STAGES if s.startswith("Batch"))
            summary.append(
                (
                    label,
                    r.llm_calls,
                    f"{wall:.2f}",
                    f"{llm:.2f}",
                    f"{wall - llm:.2f}",
                    f"{base:.3f}",
                    f"{wall / base:,.0f}x",
                    f"{(wall - llm) / base:,.0f}x",
                )
            )
            trace_rows.append(
                [label]
                + [f"{med(stages[s]):.2f}" for s in TRACE_STAGES]
                + [f"{med(stages['remainder (prompts, approval gate, bookkeeping)']):.2f}"]
            )
            progress_rows.append([label] + [f"{med(spans[s]):.2f}" for s in PROGRESS_STAGES])

        # a batch of 50, per question
        batch_walls, batch_alone, batch_spans = [], [], defaultdict(list)
        questions = h.GENERATED_QUESTIONS
        h.pipeline(db, model.base_url, k=10, progress=progress).run_batch(questions[:10])
        progress.events = []
        for _ in range(max(3, repeat // 5)):
            bp = h.pipeline(db, model.base_url, k=10, progress=progress)
            started = time.perf_counter()
            results = bp.run_batch(questions)
            ended = time.perf_counter()
            batch_walls.append((ended - started) * 1000.0 / len(questions))
            for stage, ms in progress.spans(started, ended).items():
                batch_spans[stage].append(ms / len(questions))
            batch_alone.append(sum(sql_alone(plain, r.sql) for r in results) / len(questions))
    plain.dispose()

    h.table(
        f"Wall time per question, median of {repeat} asks (ms)",
        [
            "question",
            "LLM calls",
            "wall",
            "of which LLM calls",
            "without LLM calls",
            "SQL alone",
            "wall / SQL alone",
            "without LLM / SQL alone",
        ],
        summary,
    )
    short = [
        "B1 call",
        "Schema",
        "Data",
        "B2 call",
        "Safety",
        "Execute",
        "B3 call",
        "ResultVal",
        "B4 call",
        "remainder",
    ]
    h.table(
        "Split by the trace's per-agent durations, medians (ms); "
        "remainder = prompt building, approval gate, bookkeeping",
        ["question"] + short,
        trace_rows,
    )
    h.table(
        "Split by progress events, medians (ms)",
        [
            "question",
            "setup",
            "reasoning",
            "exploring",
            "writing SQL*",
            "approval",
            "running SQL",
            "correcting",
            "answer",
            "after",
        ],
        progress_rows,
    )
    bw, ba = med(batch_walls), med(batch_alone)
    h.table(
        f"Batch of {len(questions)} questions, k = 10, per question (median of {len(batch_walls)} batches, ms)",
        ["wall / question", "SQL alone / question", "ratio"] + [s for s in PROGRESS_STAGES[1:-1]],
        [
            [f"{bw:.2f}", f"{ba:.3f}", f"{bw / ba:,.0f}x"]
            + [f"{med(batch_spans[s]):.2f}" for s in PROGRESS_STAGES[1:-1]]
        ],
    )
    print(
        '\n* "writing SQL" also holds the SafetyValidator and the approval items\' creation, which run after '
        "its last progress event.\nLLM call times are the client's: prompt building, the openai SDK, the local "
        "HTTP round trip and the scripted server's own work (no model latency)."
    )


if __name__ == "__main__":
    main()
