"""Traces of a run through one seam: OpenTelemetry spans when configured, nothing when off.

Off by default. On when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set or ``SQLGATE_OTEL=1`` (spans are
then exported by OTLP over HTTP, configured by the standard ``OTEL_*`` variables), or when a
program installs a tracer provider with ``use_tracer_provider`` (tests: the SDK's
``InMemorySpanExporter``). When off, ``opentelemetry`` is never imported and ``span()`` returns
one shared object whose methods do nothing.

Spans (names and attributes are listed in the README's "Observability" section):

    sqlgate.run                     one advance of a run (start, or resume after a decision)
      sqlgate.stage.<name>          reasoning, exploration, generation, approval, synthesis
        chat <model>                one LLM call (GenAI semantic conventions)
        sqlgate.validate            one statement through the safety validator
        sqlgate.approval            the review of one cycle's batch (or the pause at the gate)
        sqlgate.approval.wait       on a resumed run: the batch opened -> decided, as it happened
        sqlgate.execute             one approved statement run against the database

Example:
    >>> with span("sqlgate.validate", {"sqlgate.question_id": "q1"}) as s:
    ...     s.set_attribute("sqlgate.validation.ok", True)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from orchestrator.core import metrics
from orchestrator.core.errors import ConfigurationError

Attributes = Mapping[str, str | bool | int | float]
T = TypeVar("T")

OTEL_ENV = "SQLGATE_OTEL"
ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACER_NAME = "sqlgate"


class _Off:
    """The span when telemetry is off: a context manager and a span that do nothing."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_attribute(self, key: str, value: object) -> None:
        return None

    def set_attributes(self, attributes: Attributes) -> None:
        return None

    def add_event(self, name: str, attributes: Attributes | None = None) -> None:
        return None


OFF = _Off()
_lock = threading.Lock()
_tracer: Any = None
_decided = False


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces (an OTLP endpoint, or ``SQLGATE_OTEL=1``).

    Example:
        >>> wanted({"SQLGATE_OTEL": "1"}), wanted({})
        (True, False)
    """
    env = os.environ if environ is None else environ
    return bool(env.get(ENDPOINT_ENV, "").strip()) or env.get(OTEL_ENV, "").strip() == "1"


def _decide() -> None:
    """Once per process: turn traces on if the environment asks for them."""
    global _decided, _tracer
    with _lock:
        if _decided:
            return
        _decided = True
        if not wanted():
            return
        try:
            _tracer = _otlp_tracer()
        except ImportError as exc:
            raise ConfigurationError(
                f"traces were asked for ({ENDPOINT_ENV} or {OTEL_ENV}=1) but OpenTelemetry is "
                f"not installed ({exc.name}): pip install 'sqlgate[otel]'"
            ) from exc


def _otlp_tracer() -> Any:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the program set none: sqlgate sets its own
        provider = TracerProvider(resource=_resource(Resource))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    return provider.get_tracer(TRACER_NAME)


def _resource(resource_class: Any) -> Any:
    """The SDK's resource from the standard variables (``OTEL_SERVICE_NAME``,
    ``OTEL_RESOURCE_ATTRIBUTES``), named ``sqlgate`` when they name no service."""
    detected = resource_class.create()
    if str(detected.attributes.get("service.name", "")).startswith("unknown_service"):
        return detected.merge(resource_class({"service.name": "sqlgate"}))
    return detected


def use_tracer_provider(provider: Any | None) -> None:
    """Trace with ``provider`` (an SDK ``TracerProvider``) from now on; None turns traces off."""
    global _decided, _tracer
    with _lock:
        _decided = True
        _tracer = provider.get_tracer(TRACER_NAME) if provider is not None else None


def enabled() -> bool:
    if not _decided:
        _decide()
    return _tracer is not None


def span(
    name: str,
    attributes: Attributes | None = None,
    *,
    expected: tuple[type[BaseException], ...] = (),
) -> Any:
    """A span named ``name`` around a ``with`` block (the current span becomes its parent);
    an exception escaping the block is recorded on it as an error, unless it is one of
    ``expected`` (control flow, such as a pause at the gate: noted as an event). ``OFF`` when
    traces are off."""
    if not _decided:
        _decide()
    if _tracer is None:
        return OFF
    return _Span(_tracer.start_as_current_span(name, attributes=attributes), expected)


class _Span:
    """An OpenTelemetry span's context manager that does not call ``expected`` errors."""

    __slots__ = ("_manager", "_expected", "_span")

    def __init__(self, manager: Any, expected: tuple[type[BaseException], ...]) -> None:
        self._manager, self._expected = manager, expected

    def __enter__(self) -> Any:
        self._span = self._manager.__enter__()
        return self._span

    def __exit__(self, kind: Any, error: BaseException | None, trace: Any) -> Any:
        if error is not None and isinstance(error, self._expected):
            self._span.add_event(type(error).__name__)
            return self._manager.__exit__(None, None, None)
        return self._manager.__exit__(kind, error, trace)


def in_context(function: Callable[..., T]) -> Callable[..., T]:
    """``function`` bound to the current span, for another thread (a pool's workers), so its
    spans are children of this one. ``function`` itself when traces are off."""
    if _tracer is None:
        return function
    from opentelemetry import context

    captured = context.get_current()

    def bound(*args: Any, **kwargs: Any) -> T:
        token = context.attach(captured)
        try:
            return function(*args, **kwargs)
        finally:
            context.detach(token)

    return bound


def stage(name: str, *, expected: tuple[type[BaseException], ...] = ()) -> Any:
    """The span of one stage of a run: ``sqlgate.stage.<name>``."""
    return span(f"sqlgate.stage.{name}", {"sqlgate.stage": name}, expected=expected)


def run_ended(run_span: Any, statuses: Sequence[str]) -> None:
    """Count an advance of a run and its finished questions; note them on the run's span.

    ``statuses``: each question's status; a run with a question ``awaiting_approval`` paused.
    """
    paused = "awaiting_approval" in statuses
    metrics.runs_total.inc(outcome="paused" if paused else "finished")
    if not paused:
        for status in statuses:
            metrics.questions_total.inc(status=status)
    if run_span is not OFF:
        run_span.set_attribute("sqlgate.run.outcome", "paused" if paused else "finished")
        run_span.set_attribute("sqlgate.run.statuses", ",".join(sorted(set(statuses))))


def llm_call(model: str, agent: str) -> Any:
    """The span of one LLM call, by the GenAI semantic conventions (``chat <model>``)."""
    return span(
        f"chat {model}",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.system": "openai",
            "gen_ai.request.model": model,
            "sqlgate.agent": agent,
        },
    )


def llm_call_ended(
    call_span: Any,
    agent: str,
    http_requests: int,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    repaired: bool = False,
    error: str | None = None,
) -> None:
    """Count one LLM call and its tokens; note them on its span."""
    metrics.llm_calls_total.inc(agent=agent, result=error or "ok")
    if input_tokens:
        metrics.llm_tokens_total.inc(input_tokens, type="input")
    if output_tokens:
        metrics.llm_tokens_total.inc(output_tokens, type="output")
    if call_span is OFF:
        return
    call_span.set_attribute("sqlgate.http_requests", http_requests)
    if error is not None:
        call_span.set_attribute("error.type", error)
        return
    call_span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    call_span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    call_span.set_attribute("sqlgate.repaired", repaired)


def llm_response(model: str | None, finish_reason: str | None) -> None:
    """Note the model that answered and why it stopped on the current LLM call's span."""
    if _tracer is None:
        return
    from opentelemetry import trace

    current = trace.get_current_span()
    if model:
        current.set_attribute("gen_ai.response.model", model)
    if finish_reason:
        current.set_attribute("gen_ai.response.finish_reasons", [finish_reason])


def limiter_waited(seconds: float) -> None:
    """A request waited ``seconds`` for the rate limiter: counted, and an event on the span."""
    metrics.limiter_waits_total.inc()
    metrics.limiter_wait_seconds_total.inc(seconds)
    if _tracer is not None:
        from opentelemetry import trace

        trace.get_current_span().add_event("sqlgate.limiter.wait", {"sqlgate.wait_s": seconds})


def waited_at_gate(batch_id: str, opened: datetime, decided: datetime, status: str) -> None:
    """A finished span ``sqlgate.approval.wait`` from the batch's opening to its decision, as
    they happened (in other processes, maybe), under the current span of the resumed run."""
    if _tracer is None:
        return
    wait = _tracer.start_span(
        "sqlgate.approval.wait",
        start_time=_nanoseconds(opened),
        attributes={
            "sqlgate.approval.batch_id": batch_id,
            "sqlgate.approval.status": status,
            "sqlgate.approval.wait_s": (decided - opened).total_seconds(),
        },
    )
    wait.end(end_time=_nanoseconds(decided))


def _nanoseconds(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
