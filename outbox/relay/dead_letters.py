"""Messages RabbitMQ dead-lettered, back to Postgres as rows to publish again.

A quorum queue dead-letters a message redelivered past its delivery limit
(:mod:`outbox.rabbitmq_queues`), and any queue dead-letters a message a
worker rejected, into the queue's ``.XQ``; no worker reads that queue. The
relay reads it: the rows each message carries go back to ``pending`` (those
still ``queued``), and only once Postgres has committed that is the message
acknowledged. A relay that dies in between leaves the message in ``.XQ`` for
the next drain: a row returned twice is published twice at most, and the
worker that finds it no longer queued skips it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import pika
import pika.exceptions
from dramatiq.common import xq_name

from outbox.broker import queue_name
from outbox.broker_urls import amqp_nodes
from outbox.config import Settings
from outbox.errors import BrokerError
from outbox.models import Priority
from outbox.rabbitmq_queues import wire_name
from outbox.relay.broker_watch import row_ids

log = logging.getLogger(__name__)

# Messages read per queue and drain: one Postgres statement returns their rows.
_BATCH = 500


class DeadLetters:
    def __init__(self, url: str, queues: Iterable[str]) -> None:
        """``queues``: the queues on the wire whose ``.XQ`` is read."""
        self.parameters = [pika.URLParameters(node) for node in amqp_nodes(url)]
        for parameters in self.parameters:
            parameters.socket_timeout = 5
            parameters.blocked_connection_timeout = 5
        self.queues = [xq_name(q) for q in queues]

    def drain(self, give_back: Callable[[list[int]], int]) -> int:
        """Hand the rows of every dead-lettered message to ``give_back`` (which
        commits them to Postgres), then acknowledge the messages; rows returned."""
        try:
            connection = pika.BlockingConnection(self.parameters)
        except pika.exceptions.AMQPError as exc:
            raise BrokerError(f"cannot read the dead-letter queues: {exc!r}") from exc
        returned = 0
        try:
            for queue in self.queues:
                returned += self._drain_queue(connection, queue, give_back)
        except pika.exceptions.AMQPError as exc:
            raise BrokerError(f"cannot read the dead-letter queues: {exc!r}") from exc
        finally:
            if connection.is_open:
                connection.close()
        return returned

    def _drain_queue(
        self,
        connection: pika.BlockingConnection,
        queue: str,
        give_back: Callable[[list[int]], int],
    ) -> int:
        channel = connection.channel()
        returned = 0
        while True:
            last_tag, ids, count = None, [], 0
            while count < _BATCH:
                try:
                    method, _properties, body = channel.basic_get(queue, auto_ack=False)
                except pika.exceptions.ChannelClosedByBroker as exc:
                    if exc.reply_code == 404:  # not declared yet: nothing dead-lettered
                        return returned
                    raise
                if method is None:
                    break
                last_tag, count = method.delivery_tag, count + 1
                ids += row_ids(body)
            if last_tag is None:
                break
            # Committed before the acknowledgement: a failure here leaves the
            # messages in the queue (the channel closes unacknowledged).
            went_back = give_back(ids)
            channel.basic_ack(last_tag, multiple=True)
            if went_back:
                log.warning(
                    "%d messages were dead-lettered in %s: %d of their rows are pending again",
                    count,
                    queue,
                    went_back,
                )
            returned += went_back
            if count < _BATCH:
                break
        if channel.is_open:
            channel.close()
        return returned


def dead_letters(settings: Settings, priorities: Iterable[Priority]) -> DeadLetters:
    """The dead-letter queues of ``priorities`` in the broker (RabbitMQ) the settings name."""
    queues = [wire_name(settings.namespace, queue_name(p)) for p in priorities]
    return DeadLetters(settings.broker, queues)
