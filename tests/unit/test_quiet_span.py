"""quiet_span: a span recording failures by type, or none while tracing is off."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from outbox.telemetry import tracing


def test_without_a_tracer_provider_no_span_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing.trace, "get_tracer_provider", trace.ProxyTracerProvider)
    with tracing.quiet_span("outbox enqueue") as span:
        assert span is trace.INVALID_SPAN
        assert not span.is_recording()
    with pytest.raises(KeyError), tracing.quiet_span("outbox enqueue"):
        raise KeyError("a@example.org")  # passes through untouched


def test_with_a_tracer_provider_a_failure_is_recorded_by_its_type_only(
    spans: InMemorySpanExporter,
) -> None:
    spans.clear()
    with tracing.quiet_span("outbox enqueue") as span:
        assert span.is_recording()
    with pytest.raises(KeyError), tracing.quiet_span("outbox enqueue_many"):
        raise KeyError("a@example.org")
    first, second = spans.get_finished_spans()
    assert (first.name, first.status.status_code) == ("outbox enqueue", StatusCode.UNSET)
    assert second.name == "outbox enqueue_many"
    assert second.status.status_code is StatusCode.ERROR
    assert [(e.name, dict(e.attributes or {})) for e in second.events] == [
        ("exception", {"exception.type": "KeyError"})
    ]
    assert "a@example.org" not in repr(second.to_json())


def test_tracing_is_on_only_with_a_tracer_provider_installed(
    monkeypatch: pytest.MonkeyPatch, spans: InMemorySpanExporter
) -> None:
    assert tracing.is_tracing()  # the fixture installed the SDK's
    for no_op in (trace.ProxyTracerProvider, trace.NoOpTracerProvider):
        monkeypatch.setattr(tracing.trace, "get_tracer_provider", no_op)
        assert not tracing.is_tracing()
