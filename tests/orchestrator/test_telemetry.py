"""Traces and metrics of real runs: the demo's pipeline, its model replies replayed offline.

Spans are read from the OpenTelemetry SDK's ``InMemorySpanExporter``; whether sqlgate imports
OpenTelemetry when traces are off is checked in a fresh interpreter.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from approvals import ApprovalGate, Approve, ApproveAll, SqlApprovalStore
from orchestrator.core import metrics, telemetry
from orchestrator.core.errors import ConfigurationError
from orchestrator.core.question import PausedAtGate
from orchestrator.core.result import RunStatus
from orchestrator.core.runs import RunStore
from orchestrator.features.demo import DEMO_QUESTIONS, TOP_CATEGORIES, DemoSession
from tests.conftest import ROOT
from tests.orchestrator.conftest import Harness
from tests.scripted_llm import scenarios as sc

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use_tracer_provider(provider)
    yield exporter
    telemetry.use_tracer_provider(None)
    provider.shutdown()


def by_name(spans, name):
    return [s for s in spans if s.name == name]


def test_a_run_is_traced_run_stages_llm_calls_validation_approval_execution(exporter, demo_db):
    session = DemoSession.replaying(demo_db, ApproveAll())
    result = session.ask(TOP_CATEGORIES)
    assert result.status is RunStatus.ANSWERED
    spans = exporter.get_finished_spans()
    ids = {s.context.span_id: s for s in spans}

    def parent(span):
        return ids[span.parent.span_id].name if span.parent else None

    (run,) = by_name(spans, "sqlgate.run")
    assert run.attributes["sqlgate.run.outcome"] == "finished"
    assert run.attributes["sqlgate.questions"] == 1
    stages = [s.name for s in spans if parent(s) == "sqlgate.run"]
    assert stages == [
        "sqlgate.stage.reasoning",
        "sqlgate.stage.exploration",
        "sqlgate.stage.generation",
        "sqlgate.stage.approval",
        "sqlgate.stage.synthesis",
    ]

    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == result.llm_calls == 3
    for chat in chats:
        assert chat.name == "chat sqlgate-scripted-demo"
        assert chat.attributes["gen_ai.request.model"] == "sqlgate-scripted-demo"
        assert chat.attributes["gen_ai.response.model"] == "sqlgate-scripted-demo"
        assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert parent(chat).startswith("sqlgate.stage.")
    assert sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats) == result.tokens.prompt
    assert (
        sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats) == result.tokens.completion
    )
    assert result.tokens.prompt > 0

    (validate,) = by_name(spans, "sqlgate.validate")
    assert validate.attributes["sqlgate.validation.ok"] is True
    (approval,) = by_name(spans, "sqlgate.approval")
    assert parent(approval) == parent(validate) == "sqlgate.stage.approval"
    assert approval.attributes["sqlgate.approval.status"] == "resolved"
    (execute,) = by_name(spans, "sqlgate.execute")
    assert parent(execute) == "sqlgate.stage.approval"
    assert execute.attributes["db.system.name"] == "sqlite"
    assert execute.attributes["sqlgate.rows"] == result.row_count == 5
    assert len({s.context.trace_id for s in spans}) == 1


class _Accepted:
    ok, findings, refusal = True, [], None

    def __init__(self, sql: str) -> None:
        self.sql = sql


@pytest.mark.vcr
def test_a_paused_run_and_its_resumption_are_two_traces_the_wait_shown_as_it_happened(
    exporter, harness: Harness, demo_url: str, tmp_path: Path, vcr
) -> None:
    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    paused = harness.pipeline(demo_url, None, stores=(SqlApprovalStore(url), RunStore(url)))
    assert paused.ask(sc.PRODUCT_COUNT).status is RunStatus.AWAITING_APPROVAL
    (first,) = by_name(exporter.get_finished_spans(), "sqlgate.run")
    assert first.attributes["sqlgate.run.outcome"] == "paused"
    (approval,) = by_name(exporter.get_finished_spans(), "sqlgate.approval")
    assert approval.attributes["sqlgate.approval.status"] == "paused"
    assert approval.status.status_code is StatusCode.UNSET  # a pause is not an error
    batch_id = approval.attributes["sqlgate.approval.batch_id"]

    elsewhere = SqlApprovalStore(url)
    [record] = elsewhere.pending_batches()
    gate = ApprovalGate(None, validate=_Accepted, store=elsewhere)
    gate.submit(batch_id, {i.call_id: Approve() for i in record.batch.pending}, actor="alice")
    exporter.clear()
    fresh = harness.pipeline(demo_url, None, stores=(SqlApprovalStore(url), RunStore(url)))
    [done] = fresh.resume(first.attributes["sqlgate.run_id"])
    assert done.status is RunStatus.ANSWERED

    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "sqlgate.run")
    assert run.attributes["sqlgate.resumed"] is True
    assert run.context.trace_id != first.context.trace_id
    (wait,) = by_name(spans, "sqlgate.approval.wait")
    decided = elsewhere.get_batch(batch_id).outcome.decided_at
    assert wait.attributes["sqlgate.approval.batch_id"] == batch_id
    assert wait.start_time == int(record.batch.created_at.timestamp() * 1e9)
    assert wait.end_time == int(decided.timestamp() * 1e9)
    assert [s.name for s in spans if s.parent and s.parent.span_id == run.context.span_id] == [
        "sqlgate.stage.approval",
        "sqlgate.stage.synthesis",
    ]


def test_the_module_examples_run():
    import doctest

    assert doctest.testmod(telemetry).failed == 0
    assert doctest.testmod(metrics).failed == 0


def test_runs_calls_tokens_and_limiter_waits_are_counted(demo_db):
    m = metrics
    before = {
        "calls": m.llm_calls_total.value(result="ok"),
        "answered": m.questions_total.value(status="answered"),
        "finished": m.runs_total.value(outcome="finished"),
        "input": m.llm_tokens_total.value(type="input"),
        "output": m.llm_tokens_total.value(type="output"),
        "waits": m.limiter_waits_total.value(),
    }

    session = DemoSession.replaying(demo_db, ApproveAll())
    results = [session.ask(q) for q in DEMO_QUESTIONS]

    answered = [r.status for r in results].count(RunStatus.ANSWERED)
    assert m.runs_total.value(outcome="finished") - before["finished"] == len(DEMO_QUESTIONS)
    assert m.questions_total.value(status="answered") - before["answered"] == answered == 3
    assert m.llm_calls_total.value(result="ok") - before["calls"] == 10
    assert sum(r.llm_calls for r in results) == 10
    assert m.llm_tokens_total.value(type="input") - before["input"] == sum(
        r.tokens.prompt for r in results
    )
    assert m.llm_tokens_total.value(type="output") - before["output"] == sum(
        r.tokens.completion for r in results
    )
    # 10 requests under 5 per 60 s: the limiter held some back (on the demo's virtual clock)
    assert session.simulated_wait_s > 0
    assert m.limiter_waits_total.value() > before["waits"]


def test_a_pause_at_the_gate_is_an_event_an_error_is_an_error(exporter):
    with pytest.raises(PausedAtGate):
        with telemetry.span("sqlgate.approval", expected=(PausedAtGate,)):
            raise PausedAtGate("batch_1", 1, {})
    with pytest.raises(ValueError):
        with telemetry.span("sqlgate.stage.generation", expected=(PausedAtGate,)):
            raise ValueError("broken")
    paused, broken = exporter.get_finished_spans()
    assert paused.status.status_code is StatusCode.UNSET
    assert [e.name for e in paused.events] == ["PausedAtGate"]
    assert broken.status.status_code is StatusCode.ERROR


def test_traces_asked_for_without_opentelemetry_is_a_clear_configuration_error(monkeypatch):
    monkeypatch.setenv("SQLGATE_OTEL", "1")
    monkeypatch.setattr(telemetry, "_decided", False)
    monkeypatch.setattr(telemetry, "_tracer", None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if the extra were missing
    with pytest.raises(ConfigurationError, match=r"pip install 'sqlgate\[otel\]'"):
        telemetry.span("sqlgate.run")


def test_wanted_reads_the_endpoint_or_the_switch():
    assert telemetry.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert telemetry.wanted({"SQLGATE_OTEL": "1"})
    assert not telemetry.wanted({"SQLGATE_OTEL": "0"})
    assert not telemetry.wanted({})


_PROBE = textwrap.dedent(
    """
    import importlib.abc, json, sys
    from pathlib import Path

    OURS = [str(Path(p).resolve()) for p in ("orchestrator", "agents", "safety", "ratelimit",
                                             "approvals")]
    seen = []

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] == "opentelemetry":
                frame = sys._getframe(1)
                while frame and "importlib" in frame.f_code.co_filename:
                    frame = frame.f_back
                where = str(Path(frame.f_code.co_filename).resolve()) if frame else "?"
                if any(where.startswith(p) for p in OURS):
                    seen.append(f"{name} from {where}")
            return None

    sys.meta_path.insert(0, Watch())
    from approvals import ApprovalGate, Approve, ApproveAll, SqlApprovalStore
    from orchestrator.core import telemetry
    from orchestrator.features.demo import TOP_CATEGORIES, DemoSession
    from orchestrator.features.demo.database import build_demo_database

    db = build_demo_database(Path(sys.argv[1]))
    result = DemoSession.replaying(db, ApproveAll()).ask(TOP_CATEGORIES)
    provider = None
    if telemetry.enabled():
        from opentelemetry import trace
        provider = trace.get_tracer_provider()
        exporters = [type(p.span_exporter).__name__
                     for p in provider._active_span_processor._span_processors]
        provider = {"provider": type(provider).__name__, "exporters": exporters}
    print(json.dumps({"status": result.status.value, "enabled": telemetry.enabled(),
                      "imports": seen, "provider": provider}))
    """
)


def _probe(tmp_path: Path, **env: str) -> dict:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OTEL_EXPORTER_OTLP_ENDPOINT", "SQLGATE_OTEL", "OTEL_SERVICE_NAME")
    }
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "demo.sqlite")],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_when_off_sqlgate_never_imports_opentelemetry(tmp_path):
    found = _probe(tmp_path)
    assert found == {"status": "answered", "enabled": False, "imports": [], "provider": None}


class _Collector(http.server.BaseHTTPRequestHandler):
    """A local OTLP/HTTP receiver: keeps every span name it is sent, and the service names."""

    received: list[tuple[str, list[str]]] = []
    services: set[str] = set()

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        names = [
            span.name
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        self.received.append((self.path, names))
        self.services.update(
            attribute.value.string_value
            for resource in request.resource_spans
            for attribute in resource.resource.attributes
            if attribute.key == "service.name"
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _collect(tmp_path: Path, **env: str) -> dict:
    _Collector.received = []
    _Collector.services = set()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        return _probe(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, **env)
    finally:
        server.shutdown()


def test_the_environment_turns_traces_on_and_they_reach_the_collector_by_otlp(tmp_path):
    found = _collect(tmp_path)
    assert found["status"] == "answered" and found["enabled"] is True
    assert found["imports"]  # this time sqlgate imported it
    assert found["provider"] == {"provider": "TracerProvider", "exporters": ["OTLPSpanExporter"]}
    # the batch processor sent everything when the process exited
    paths = {path for path, _ in _Collector.received}
    names = [name for _, batch in _Collector.received for name in batch]
    assert paths == {"/v1/traces"}
    assert names.count("sqlgate.run") == 1 and names.count("chat sqlgate-scripted-demo") == 3
    assert {"sqlgate.validate", "sqlgate.approval", "sqlgate.execute"} <= set(names)
    assert _Collector.services == {"sqlgate"}  # no service named in the environment


def test_the_service_is_named_by_otel_service_name(tmp_path):
    found = _collect(tmp_path, OTEL_SERVICE_NAME="analytics-gate")
    assert found["status"] == "answered" and _Collector.received
    assert _Collector.services == {"analytics-gate"}
