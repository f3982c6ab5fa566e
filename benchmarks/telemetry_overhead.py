"""CPU per question with traces off and on (OpenTelemetry SDK, in-memory exporter).

Run: .venv/bin/python benchmarks/telemetry_overhead.py [--rounds N] [--batch N]

The model is sqlgate's scripted server in a child process (see ``_harness``), so the CPU
measured (``time.process_time``, every thread of this process) is sqlgate's own work plus the
``openai`` client's. Each round runs the same work twice, traces off then on, in the same
process, so machine load hits both alike:

- ``ask``: 10 questions, one run each;
- ``batch``: one run of ``--batch`` questions (default 50, k = 10).

"On" is ``telemetry.use_tracer_provider`` with an SDK ``TracerProvider`` and a
``SimpleSpanProcessor`` into an ``InMemorySpanExporter`` (cleared after each round): every span
is built, ended and exported synchronously, with no network (an OTLP ``BatchSpanProcessor``
also serialises and sends from a background thread, not measured here). "Off" is sqlgate's
default: no provider, ``span()`` returns a shared
no-op. Figures: median CPU ms per question over the rounds, and spans per question; then what
one span costs by itself, off and on (``timeit`` of an empty ``with telemetry.span(...)``).
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit

import _harness as h

from orchestrator.core import telemetry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    asks = h.GENERATED_QUESTIONS[:10]
    batch = h.many_questions(args.batch)
    cpu: dict[tuple[str, str], list[float]] = {}
    spans: dict[str, list[float]] = {}
    with h.ScriptedModel() as model:
        pipeline = h.pipeline(h.demo_database(), model.base_url)
        pipeline.ask(asks[0])  # warm: schema cache, connections, the JSON schemas
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                telemetry.use_tracer_provider(provider if mode == "on" else None)
                exporter.clear()
                t0 = time.process_time()
                for question in asks:
                    pipeline.ask(question)
                t1 = time.process_time()
                spans_ask = len(exporter.get_finished_spans())
                exporter.clear()
                results = pipeline.run_batch(batch)
                t2 = time.process_time()
                assert all(r.status.value == "answered" for r in results), "a question failed"
                cpu.setdefault(("ask", mode), []).append((t1 - t0) / len(asks))
                cpu.setdefault(("batch", mode), []).append((t2 - t1) / len(batch))
                if mode == "on":
                    spans.setdefault("ask", []).append(spans_ask / len(asks))
                    spans.setdefault("batch", []).append(
                        len(exporter.get_finished_spans()) / len(batch)
                    )
    telemetry.use_tracer_provider(None)
    per_span = {}
    for mode in ("off", "on"):
        telemetry.use_tracer_provider(provider if mode == "on" else None)
        number = 200_000 if mode == "off" else 20_000
        best = min(timeit.repeat(_one_span, number=number, repeat=5))
        per_span[mode] = best / number * 1e6
        exporter.clear()
    telemetry.use_tracer_provider(None)

    print(h.MODEL_NOTE)
    print(f"CPU per question (median of {args.rounds} rounds; off and on interleaved)")
    rows = []
    for kind, label in (("ask", "ask, 1 question per run"), ("batch", f"batch of {len(batch)}")):
        off = statistics.median(cpu[(kind, "off")]) * 1000
        on = statistics.median(cpu[(kind, "on")]) * 1000
        rows.append(
            (
                label,
                f"{off:.2f}",
                f"{on:.2f}",
                f"{on / off:.3f}",
                f"{on - off:+.2f}",
                f"{statistics.median(spans[kind]):.1f}",
            )
        )
    h.table(
        "telemetry off vs on (in-memory exporter)",
        ["run", "off ms", "on ms", "on / off", "difference ms", "spans / question"],
        rows,
    )
    print(
        f"one empty span with 2 attributes (best of 5): off {per_span['off']:.3f} µs, "
        f"on {per_span['on']:.1f} µs"
    )


def _one_span() -> None:
    with telemetry.span("sqlgate.validate", {"sqlgate.question_id": "q1", "sqlgate.cycle": 1}):
        pass


if __name__ == "__main__":
    main()
