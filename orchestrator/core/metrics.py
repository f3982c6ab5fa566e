"""Process-wide counters of runs, LLM calls, limiter waits and approvals, in Prometheus's text
exposition format (0.0.4), written here so the base install needs no metrics library.

Counting is a lock and an addition; ``sqlgate serve`` shows the process's figures at
``/metrics`` (admin token), together with gauges read when scraped (``Registry.collectors``).

Example:
    >>> registry = Registry()
    >>> calls = registry.counter("demo_calls_total", "Calls.", ("agent",))
    >>> calls.inc(agent="planner")
    >>> print(registry.render(), end="")
    # HELP demo_calls_total Calls.
    # TYPE demo_calls_total counter
    demo_calls_total{agent="planner"} 1
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: A gauge read when scraped: (name, help, [(labels, value), ...]).
GaugeSamples = tuple[str, str, list[tuple[dict[str, str], float]]]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    pairs = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class Counter:
    """A monotonically increasing count per combination of label values."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        self.name, self.help, self.labelnames = name, help_text, tuple(labelnames)
        self._lock = threading.Lock()
        # a series without labels exists from the start, at 0, as Prometheus clients expose it:
        # a scrape shows the counter before its first event, and rate() sees the first one
        self._values: dict[tuple[str, ...], float] = {} if self.labelnames else {(): 0.0}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = tuple(str(labels[n]) for n in self.labelnames)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        """The count of the series with these labels; with some labels left out, the sum of
        every series that matches the ones given."""
        wanted = [(i, str(labels[n])) for i, n in enumerate(self.labelnames) if n in labels]
        with self._lock:
            return sum(v for k, v in self._values.items() if all(k[i] == w for i, w in wanted))

    def lines(self) -> list[str]:
        with self._lock:
            values = sorted(self._values.items())
        return [f"{self.name}{_labels(self.labelnames, k)} {_number(v)}" for k, v in values]


class Histogram:
    """Observations counted into cumulative buckets (``le``), with their sum and count."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float],
    ) -> None:
        self.name, self.help, self.labelnames = name, help_text, tuple(labelnames)
        self.buckets = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], list[float]] = {}  # bucket counts..., sum, count

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(str(labels[n]) for n in self.labelnames)
        with self._lock:
            series = self._series.setdefault(key, [0.0] * (len(self.buckets) + 2))
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    series[i] += 1
            series[-2] += value
            series[-1] += 1

    def count(self, **labels: str) -> float:
        with self._lock:
            series = self._series.get(tuple(str(labels[n]) for n in self.labelnames))
            return series[-1] if series else 0.0

    def lines(self) -> list[str]:
        with self._lock:
            series = sorted((k, list(v)) for k, v in self._series.items())
        out = []
        for key, values in series:
            for bound, seen in zip(self.buckets, values, strict=False):
                le = f'le="{_number(bound)}"'
                out.append(f"{self.name}_bucket{_labels(self.labelnames, key, le)} {_number(seen)}")
            inf = 'le="+Inf"'
            out.append(
                f"{self.name}_bucket{_labels(self.labelnames, key, inf)} {_number(values[-1])}"
            )
            out.append(f"{self.name}_sum{_labels(self.labelnames, key)} {_number(values[-2])}")
            out.append(f"{self.name}_count{_labels(self.labelnames, key)} {_number(values[-1])}")
        return out


class Registry:
    """The metrics of one process, rendered in the order they were declared."""

    def __init__(self) -> None:
        self.metrics: list[Counter | Histogram] = []
        self.collectors: list[Callable[[], Iterable[GaugeSamples]]] = []

    def counter(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> Counter:
        metric = Counter(name, help_text, labelnames)
        self.metrics.append(metric)
        return metric

    def histogram(
        self, name: str, help_text: str, labelnames: Sequence[str] = (), *, buckets: Sequence[float]
    ) -> Histogram:
        metric = Histogram(name, help_text, labelnames, buckets=buckets)
        self.metrics.append(metric)
        return metric

    def render(self, collectors: Iterable[Callable[[], Iterable[GaugeSamples]]] = ()) -> str:
        """Every metric in the text exposition format; ``collectors`` add gauges read now."""
        out: list[str] = []
        for metric in self.metrics:
            out += [f"# HELP {metric.name} {metric.help}", f"# TYPE {metric.name} {metric.kind}"]
            out += metric.lines()
        for collect in [*self.collectors, *collectors]:
            for name, help_text, samples in collect():
                out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
                for labels, value in samples:
                    out.append(
                        f"{name}{_labels(list(labels), list(labels.values()))} {_number(value)}"
                    )
        return "\n".join(out) + "\n"


#: The process's metrics.
METRICS = Registry()
runs_total = METRICS.counter(
    "sqlgate_runs_total",
    "Advances of runs by how they ended: finished, or paused at the approval gate.",
    ("outcome",),
)
questions_total = METRICS.counter(
    "sqlgate_questions_total", "Questions finished, by their status.", ("status",)
)
llm_calls_total = METRICS.counter(
    "sqlgate_llm_calls_total",
    "Logical LLM calls (retries and a repair included in one), by agent and result.",
    ("agent", "result"),
)
llm_tokens_total = METRICS.counter(
    "sqlgate_llm_tokens_total", "Tokens the model reported, by type (input, output).", ("type",)
)
limiter_waits_total = METRICS.counter(
    "sqlgate_limiter_waits_total", "LLM requests that waited for the rate limiter."
)
limiter_wait_seconds_total = METRICS.counter(
    "sqlgate_limiter_wait_seconds_total", "Seconds LLM requests waited for the rate limiter."
)
approval_latency_seconds = METRICS.histogram(
    "sqlgate_approval_latency_seconds",
    "Seconds from an approval batch opened to its decision (or expiry), by outcome.",
    ("outcome",),
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400),
)
