"""One line when a worker process loses the broker, one when it reaches it again.

Dramatiq's consumer threads say "Consumer encountered a connection error"
and "Restarting consumer" at every try while the broker is away (each queue,
every few seconds, as critical). This filter keeps those to itself: the first
becomes the process's one "the broker is down" warning, and a probe asks the
broker once a second until it answers, which is the one "back" line. The
consumers reconnect by themselves meanwhile (a Sentinel-managed client asks
the sentinels for the new master, pika tries each node of a cluster). The
warnings about each acknowledgement lost with the connection go the same way:
the broker delivers those messages again, and a worker skips a row it finds
no longer queued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import dramatiq
from dramatiq.common import dq_name

from outbox.telemetry.log_once import DownOnce, quiet_broker_client_logs

log = logging.getLogger(__name__)

_LOST = "Consumer encountered a connection error"
_RETRY = "Restarting consumer in"
_UNACKED = "Failed to post_process_message"
_CONNECTION = "due to a connection error"
_STALE = "Failed to ack message: not in known tags"
_PROBE_EVERY = 1.0


class BrokerOutage(logging.Filter):
    def __init__(self, probe: Callable[[], object], *, every: float = _PROBE_EVERY) -> None:
        super().__init__()
        self.probe = probe
        self.every = every
        self.down = DownOnce(log, "the broker")

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if message.startswith(_LOST):
            # redis-py appends the client's whole repr to some errors: the gist is enough.
            error = record.getMessage().removeprefix(_LOST + ": ").partition(" : <")[0]
            self._lost(error[:300])
            return False
        if message.startswith(_STALE):
            return False
        if message.startswith(_UNACKED) and _CONNECTION in record.getMessage():
            self._lost("an acknowledgement was lost with the connection")
            return False
        return not (message.startswith(_RETRY) and self.down.is_down)

    def _lost(self, error: str) -> None:
        if self.down.failed(error):
            threading.Thread(target=self._wait_until_back, daemon=True).start()

    def _wait_until_back(self) -> None:
        """One thread per outage (the first failure starts it), ended by the answer."""
        while True:
            time.sleep(self.every)
            if self._answers():
                self.down.ok()
                return

    def _answers(self) -> bool:
        try:
            self.probe()
        except Exception as exc:  # any failure means: not back yet
            log.debug("the broker does not answer yet: %r", exc)
            return False
        return True


def consumer_loggers(queues: Iterable[str]) -> list[logging.Logger]:
    """The loggers of Dramatiq's consumer threads of ``queues`` and their delay queues."""
    names = [name for q in queues for name in (q, dq_name(q))]
    return [logging.getLogger(f"dramatiq.worker.ConsumerThread({name})") for name in names]


def broker_probe(broker: dramatiq.Broker) -> Callable[[], object]:
    """Asks the broker one cheap question; raises while it cannot answer."""
    client = getattr(broker, "client", None)
    if client is not None:  # Redis
        return client.ping  # type: ignore[no-any-return]
    import pika  # noqa: PLC0415 (RabbitMQ's client, on demand)

    parameters = broker.parameters  # type: ignore[attr-defined]

    def connect_and_close() -> None:
        pika.BlockingConnection(parameters).close()

    return connect_and_close


def install(broker: dramatiq.Broker, queues: Iterable[str]) -> BrokerOutage:
    outage = BrokerOutage(broker_probe(broker))
    for logger in consumer_loggers(queues):
        logger.addFilter(outage)
    # A consumer that reconnected cannot acknowledge what the old connection
    # delivered: the broker delivers it again, nothing to say per message.
    logging.getLogger("dramatiq.brokers.rabbitmq._RabbitmqConsumer").addFilter(outage)
    quiet_broker_client_logs()
    return outage
