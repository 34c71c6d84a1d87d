"""OpenTelemetry tracing for Outbox processes, configured by the standard OTEL_* variables.

With no exporter configured the global tracer stays OpenTelemetry's no-op
one, so the spans in the hot path cost a few attribute-less calls. With
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) set, spans go over
OTLP/HTTP with a batch processor; ``OTEL_SERVICE_NAME`` names the process.
"""

from __future__ import annotations

import atexit
import os

from opentelemetry import trace

_CONFIGURED = False


def is_enabled(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
        return False
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup_tracing(service_name: str) -> bool:
    """Install an exporting TracerProvider once per process; False when tracing is off."""
    global _CONFIGURED  # noqa: PLW0603 - one provider per process, by design
    if _CONFIGURED:
        return True
    if not is_enabled():
        return False
    # Imported only when used: the SDK and exporter are not needed otherwise.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name)})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    # Flush what is buffered when the process ends normally (SIGTERM included).
    atexit.register(provider.shutdown)
    _CONFIGURED = True
    return True
