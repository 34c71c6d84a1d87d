"""Dramatiq hooks that connect the worker's life cycle to delivery."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import dramatiq
from dramatiq.broker import MessageProxy
from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanKind

from outbox.telemetry.setup import setup_tracing
from outbox.telemetry.tracing import is_tracing, record_failure, tracer


class ShutdownSignal(dramatiq.Middleware):
    """Sets an event when the worker starts shutting down (SIGTERM).

    A platform stopping a dyno signals every process of it, and the Dramatiq
    master forwards its own SIGTERM too: each worker process gets two, and
    Dramatiq takes the second as "exit now", abandoning batches mid-send. So
    in each worker process the first SIGTERM starts the graceful stop (and
    tells batches to hand back what they have not tried) and later ones are
    ignored; the platform's SIGKILL stays the hard stop.
    """

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        graceful = signal.getsignal(signal.SIGTERM)
        stopping = self.event

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            if stopping.is_set():
                return
            stopping.set()
            if callable(graceful):
                graceful(signum, frame)

        signal.signal(signal.SIGTERM, on_sigterm)

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self.event.set()


class Tracing(dramatiq.Middleware):
    """A CONSUMER span around each message, child of the relay's PRODUCER span.

    No maintained OpenTelemetry instrumentation for Dramatiq exists, so this is
    the small one the design needs: extract the context the publisher put in
    ``options["otel"]``, start ``process <queue>`` and make it current while
    the actor runs; delivery's per-email spans link to it.
    """

    def __init__(self, service_name: str) -> None:
        self.service_name = service_name
        self._spans: dict[str, tuple[Span, object]] = {}
        self._lock = threading.Lock()

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        # In each worker process, not at import: the relay imports this package too.
        setup_tracing(self.service_name)

    def before_process_message(self, broker: dramatiq.Broker, message: MessageProxy) -> None:
        if not is_tracing():
            return  # a no-op span and its context would cost each message for nothing
        parent = propagate.extract(message.options.get("otel") or {})
        span = tracer.start_span(
            f"process {message.queue_name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": "dramatiq",
                "messaging.operation.type": "process",
                "messaging.destination.name": message.queue_name,
                "messaging.message.id": message.message_id,
            },
        )
        token = context.attach(trace.set_span_in_context(span))
        with self._lock:
            self._spans[message.message_id] = (span, token)

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: MessageProxy,
        *,
        result: Any | None = None,
        exception: BaseException | None = None,
    ) -> None:
        self._finish(message, exception)

    def after_skip_message(self, broker: dramatiq.Broker, message: MessageProxy) -> None:
        self._finish(message, None)

    def _finish(self, message: MessageProxy, exception: BaseException | None) -> None:
        with self._lock:
            span, token = self._spans.pop(message.message_id, (None, None))
        if span is None:
            return
        if exception is not None:
            record_failure(span, exception)  # by type: the message may quote a row
        span.end()
        context.detach(token)  # type: ignore[arg-type]


class Warmup(dramatiq.Middleware):
    """Builds the delivery (pool, transport) and compiles every template when a
    worker process boots, so the first login code does not pay for MJML."""

    def __init__(self, warm: Callable[[], None]) -> None:
        self.warm = warm

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        try:
            self.warm()
        except Exception:
            # A broken template must not stop the worker: the send reports it.
            logging.getLogger(__name__).exception("warming up the worker failed")


class Farewell(dramatiq.Middleware):
    """Runs ``leave`` once the worker process has finished its last message
    (its heartbeat stops and it leaves the process list)."""

    def __init__(self, leave: Callable[[], None]) -> None:
        self.leave = leave

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        try:
            self.leave()
        except Exception:
            logging.getLogger(__name__).exception("leaving the process list failed")


class Liveness(dramatiq.Middleware):
    """Starts the worker process's liveness file once its threads run
    (``outbox health --process worker-high``), and removes it at a clean stop."""

    def __init__(self, start: Callable[[Any], None], stop: Callable[[], None]) -> None:
        self.start = start
        self.stop = stop

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        try:
            self.start(worker)
        except Exception:
            logging.getLogger(__name__).exception("starting the liveness file failed")

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self.stop()
