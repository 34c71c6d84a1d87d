"""Quorum queues (OUTBOX_RABBITMQ_QUEUE_TYPE=quorum) and node lists, on this machine's RabbitMQ.

A quorum queue gives up on a message redelivered past its delivery limit. It
must dead-letter it, never drop it, and the relay must turn what was
dead-lettered back into a pending row: published again, sent, not lost.
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator

import pika
import pytest

from outbox.broker import make_broker
from outbox.config import Settings
from outbox.models import Priority
from outbox.rabbitmq_queues import wire_name
from outbox.relay.dead_letters import dead_letters
from outbox.relay.loop import Relay
from outbox.relay.publish import Publisher
from outbox.telemetry.health import broker_health
from outbox.testing.private_servers import free_port
from tests.integration.helpers import add_newsletter, pool, query, statuses
from tests.rabbitmq import connect, depth, private_vhost

pytestmark = pytest.mark.rabbitmq

LIMIT = 2


@pytest.fixture
def quorum(settings: Settings) -> Iterator[Settings]:
    """Settings on quorum queues with a small delivery limit, in a virtual host of their own."""
    with private_vhost() as url:
        yield dataclasses.replace(
            settings,
            broker_url=url,
            rabbitmq_queue_type="quorum",
            rabbitmq_delivery_limit=LIMIT,
            bulk_batch=2,
        )


def _queue_types(vhost_url: str) -> dict[str, str]:
    vhost = pika.URLParameters(vhost_url).virtual_host
    done = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "-p", vhost, "name", "type", "--no-table-headers"],
        capture_output=True,
        check=True,
        timeout=60,
        text=True,
    )
    return dict(line.split("\t") for line in done.stdout.splitlines() if line.strip())


def _wire(settings: Settings, queue: str) -> str:
    return wire_name(settings.namespace, queue)


def _refuse(url: str, queue: str, times: int) -> int:
    """Take each message of ``queue`` and hand it back ``times`` times; messages seen."""
    connection = connect(url)
    seen = 0
    try:
        channel = connection.channel()
        for _ in range(times):
            while True:
                method, _properties, _body = channel.basic_get(queue, auto_ack=False)
                if method is None:
                    break
                seen += 1
                channel.basic_nack(method.delivery_tag, requeue=True)
                if seen > 100:
                    raise AssertionError("the queue redelivers past its delivery limit")
    finally:
        connection.close()
    return seen


def test_queues_delay_queues_and_dead_letter_queues_are_quorum_queues(quorum: Settings) -> None:
    broker = make_broker(quorum)
    try:
        Publisher(broker)(Priority.HIGH, [[1]])
    finally:
        broker.close()
    types = _queue_types(quorum.broker_url)
    for queue in ("email_high", "email_high.DQ", "email_high.XQ"):
        assert types.get(_wire(quorum, queue)) == "quorum", types


def test_a_message_past_the_delivery_limit_goes_back_to_postgres_as_a_pending_row(
    quorum: Settings,
) -> None:
    ids = add_newsletter(quorum, 4)
    broker = make_broker(quorum)
    try:
        with pool(quorum) as p:
            relay = Relay(
                quorum,
                p,
                Publisher(broker),
                priorities=[Priority.BULK],
                dead_letters=dead_letters(quorum, [Priority.BULK]),
            )
            assert relay.run_round().published == 4
            assert statuses(quorum) == {"queued": 4}
            # Each message delivered and handed back until the queue gives up on it.
            _refuse(quorum.broker_url, _wire(quorum, "email_bulk"), LIMIT + 2)
            assert depth(quorum.broker_url, _wire(quorum, "email_bulk")) == 0
            assert (
                depth(quorum.broker_url, _wire(quorum, "email_bulk.XQ")) == 2
            )  # dead-lettered, not dropped
            relay.sweep()
            assert statuses(quorum) == {"pending": 4}
            assert depth(quorum.broker_url, _wire(quorum, "email_bulk.XQ")) == 0
            reasons = query(
                quorum,
                "SELECT DISTINCT reason FROM email_event WHERE outbox_id = ANY(%s)"
                " AND to_status = 'pending' AND from_status = 'queued'",
                ids,
            )
            assert reasons == [("swept: queued, the broker dead-lettered its message",)]
            # Published again, as any pending row.
            assert relay.run_round().published == 4
            assert depth(quorum.broker_url, _wire(quorum, "email_bulk")) == 2
    finally:
        broker.close()


def test_a_dead_letter_drain_leaves_a_row_a_worker_took(quorum: Settings) -> None:
    add_newsletter(quorum, 2)
    broker = make_broker(quorum)
    try:
        with pool(quorum) as p:
            relay = Relay(
                quorum,
                p,
                Publisher(broker),
                priorities=[Priority.BULK],
                dead_letters=dead_letters(quorum, [Priority.BULK]),
            )
            relay.run_round()
            with p.connection() as conn:
                conn.execute("UPDATE email_outbox SET status = 'sending' WHERE id = 1")
            _refuse(quorum.broker_url, _wire(quorum, "email_bulk"), LIMIT + 2)
            relay.sweep()
            assert dict(query(quorum, "SELECT id, status FROM email_outbox")) == {
                1: "sending",
                2: "pending",
            }
            assert depth(quorum.broker_url, _wire(quorum, "email_bulk.XQ")) == 0
    finally:
        broker.close()


def test_a_node_that_does_not_answer_is_passed_over_for_the_next(settings: Settings) -> None:
    with private_vhost() as url:
        down = f"amqp://guest:guest@127.0.0.1:{free_port()}/{url.rpartition('/')[2]}"
        nodes = dataclasses.replace(settings, broker_url=f"{down},{url}")
        broker = make_broker(nodes)
        try:
            Publisher(broker)(Priority.BULK, [[1, 2]])
            Publisher(broker)(Priority.HIGH, [[3]])
        finally:
            broker.close()
        assert depth(url, _wire(nodes, "email_bulk")) == 1
        health = broker_health(nodes)
        assert health["up"], health
        assert health["messages"]["email_bulk"] == 1
