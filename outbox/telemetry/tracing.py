"""Trace context and span attributes shared by enqueue, relay and delivery.

The W3C trace context of the business event is stored on the outbox row at
enqueue, so a send hours later, after retries and process restarts, still
joins the business event's trace. Only the OpenTelemetry API is used here;
processes install an exporting SDK through ``outbox.telemetry.setup``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, StatusCode
from opentelemetry.trace import Status as TraceStatus

from outbox.redact import addresses, recipient_hash

tracer = trace.get_tracer("outbox")
# Spans record a failure by its type only: an exception's message can quote a
# row (Postgres's "Failing row contains (…)") and with it an address.
QUIET: dict[str, Any] = {"record_exception": False, "set_status_on_exception": False}


def record_failure(span: Span, exc: BaseException) -> None:
    name = type(exc).__qualname__
    span.add_event("exception", {"exception.type": name})
    span.set_status(TraceStatus(StatusCode.ERROR, name))


@contextmanager
def failures_by_type(span: Span) -> Iterator[Span]:
    try:
        yield span
    except BaseException as exc:
        record_failure(span, exc)
        raise


class _QuietSpan:
    """``tracer.start_as_current_span(name)`` that records a failure by its type."""

    __slots__ = ("_started", "span")

    def __init__(self, name: str) -> None:
        self._started = tracer.start_as_current_span(name, **QUIET)

    def __enter__(self) -> Span:
        self.span = self._started.__enter__()
        return self.span

    def __exit__(self, kind: Any, exc: BaseException | None, traceback: Any) -> None:
        if exc is not None:
            record_failure(self.span, exc)
        self._started.__exit__(kind, exc, traceback)


_NO_SPAN: AbstractContextManager[Span] = nullcontext(trace.INVALID_SPAN)


def is_tracing() -> bool:
    """Whether a tracer provider is installed. Until a process installs an SDK's
    (``outbox.telemetry.setup``, or the application's own), every span is a
    no-op that still costs its making and its context: callers on a hot path
    make none then."""
    return not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )


def quiet_span(name: str) -> AbstractContextManager[Span]:
    """A span that records failures by type; none at all while tracing is off
    (:func:`is_tracing`): making one cost enqueue about a tenth of its Python
    for nothing. The trace context of the caller, if any, is read by
    :func:`current_traceparent` either way."""
    if not is_tracing():
        return _NO_SPAN
    return _QuietSpan(name)


def current_traceparent() -> str | None:
    """The active span's context as a ``traceparent`` header value (None when not sampled)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def context_from(traceparent: str | None) -> Context | None:
    if not traceparent:
        return None
    return propagate.extract({"traceparent": traceparent})


def span_context_from(traceparent: str | None) -> trace.SpanContext | None:
    context = context_from(traceparent)
    if context is None:
        return None
    span_context = trace.get_current_span(context).get_span_context()
    return span_context if span_context.is_valid else None


def trace_id_of(traceparent: str | None) -> str | None:
    span_context = span_context_from(traceparent)
    return f"{span_context.trace_id:032x}" if span_context else None


def email_attributes(
    *,
    outbox_id: int | None,
    idempotency_key: str,
    message_id: str,
    template: str,
    priority: str,
    recipient: str,
    tag_secret: str,
) -> Mapping[str, str | int]:
    """What makes one email findable in a trace search; the address only as a tag,
    also where the idempotency key holds one (the rest of the key stays readable)."""
    attributes: dict[str, str | int] = {
        "outbox.idempotency_key": addresses(idempotency_key, secret=tag_secret),
        "email.message_id": message_id,
        "email.template": template,
        "outbox.priority": priority,
        "email.recipient.domain": recipient.rpartition("@")[2].lower(),
        "email.recipient.hash": recipient_hash(recipient, secret=tag_secret),
    }
    if outbox_id is not None:
        attributes["outbox.id"] = outbox_id
    return attributes


def label_attributes(
    tags: Sequence[str], metadata: Mapping[str, Any], *, tag_secret: str
) -> dict[str, str | tuple[str, ...]]:
    """An email's tags and metadata as span attributes; an address in a value only as a tag."""
    attributes: dict[str, str | tuple[str, ...]] = {}
    if tags:
        attributes["outbox.tags"] = tuple(tags)
    for key, value in metadata.items():
        text = value if isinstance(value, str) else str(value).lower()
        attributes[f"outbox.metadata.{key}"] = addresses(text, secret=tag_secret)
    return attributes
