"""The hand-written Prometheus text format, read back by the Prometheus client's own parser."""

from __future__ import annotations

import pytest

from orchestrator.core.metrics import Registry

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client not installed")


def parsed(text: str) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    return {
        family.name: [(s.name, s.labels, s.value) for s in family.samples]
        for family in parser.text_string_to_metric_families(text)
    }


def test_counters_histograms_and_gauges_parse_back_with_their_values():
    registry = Registry()
    calls = registry.counter("t_calls_total", "Calls.", ("agent", "result"))
    latency = registry.histogram("t_latency_seconds", "Latency.", ("outcome",), buckets=(1, 60))
    calls.inc(agent="plan", result="ok")
    calls.inc(2, agent="plan", result="ok")
    calls.inc(agent='a "quoted"\\name\nnext', result="llm_unavailable")
    for seconds in (0.5, 30, 3600):
        latency.observe(seconds, outcome="decided")

    def pending():
        return [("t_pending", "Pending.", [({}, 4.0)])]

    families = parsed(registry.render([pending]))

    assert families["t_calls"] == [  # series in the order of their label values
        ("t_calls_total", {"agent": 'a "quoted"\\name\nnext', "result": "llm_unavailable"}, 1.0),
        ("t_calls_total", {"agent": "plan", "result": "ok"}, 3.0),
    ]
    assert families["t_latency_seconds"] == [
        ("t_latency_seconds_bucket", {"outcome": "decided", "le": "1"}, 1.0),
        ("t_latency_seconds_bucket", {"outcome": "decided", "le": "60"}, 2.0),
        ("t_latency_seconds_bucket", {"outcome": "decided", "le": "+Inf"}, 3.0),
        ("t_latency_seconds_sum", {"outcome": "decided"}, 3630.5),
        ("t_latency_seconds_count", {"outcome": "decided"}, 3.0),
    ]
    assert families["t_pending"] == [("t_pending", {}, 4.0)]
    assert calls.value(result="ok") == 3 and calls.value() == 4
    assert latency.count(outcome="decided") == 3


def test_a_counter_never_goes_down():
    with pytest.raises(ValueError):
        Registry().counter("t_total", "T.").inc(-1)
