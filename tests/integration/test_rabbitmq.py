"""RabbitMQ as the broker (OUTBOX_BROKER_URL=amqp://…), against this machine's server.

The queues are the same two as on Redis, named in OUTBOX_NAMESPACE on the
wire; RabbitMQ keeps them and their messages across its own restart, so a
restart mid-drain leaves nothing for the sweeper to find.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import dramatiq
import pytest

from outbox.broker import broker_kind, make_broker
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.models import Priority
from outbox.rabbitmq_queues import wire_name
from outbox.relay.publish import Publisher
from outbox.testing.pipeline import Pipeline
from outbox.testing.redis_keys import drop_namespace
from outbox.testing.sink import SmtpSink
from tests.integration.helpers import add_newsletter, query, statuses, wait_until
from tests.rabbitmq import connect, depth, empty_queues, queues, rabbitmqctl


@pytest.fixture
def amqp(settings: Settings, rabbitmq_url: str) -> Settings:
    """Settings on RabbitMQ (this session's virtual host), its queues empty."""
    empty_queues(rabbitmq_url, settings.namespace)
    return dataclasses.replace(settings, broker_url=rabbitmq_url)


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis://127.0.0.1:6379/0", "redis"),
        ("rediss://cache.example:6380/1", "redis"),
        ("unix:///run/redis.sock", "redis"),
        ("amqp://guest:guest@127.0.0.1:5672/%2F", "rabbitmq"),
        ("amqps://user:pw@mq.example/vhost", "rabbitmq"),
    ],
)
def test_the_url_picks_the_broker(url: str, kind: str) -> None:
    assert broker_kind(url) == kind


@pytest.mark.parametrize("url", ["http://127.0.0.1:5672", "kafka://x", "127.0.0.1:5672"])
def test_another_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_BROKER_URL"):
        broker_kind(url)


@pytest.mark.rabbitmq
def test_published_messages_are_durable_and_persistent(amqp: Settings) -> None:
    broker = make_broker(amqp)
    try:
        Publisher(broker)(Priority.BULK, [[1, 2], [3]])
    finally:
        broker.close()
    connection = connect(amqp.broker_url)
    try:
        channel = connection.channel()
        queue = wire_name(amqp.namespace, "email_bulk")
        declared = channel.queue_declare(queue=queue, passive=True)
        assert declared.method.message_count == 2
        method, properties, _body = channel.basic_get(queue, auto_ack=False)
        assert method is not None
        assert properties.delivery_mode == 2  # persistent: written to disk
    finally:
        connection.close()


@pytest.mark.rabbitmq
def test_two_outboxes_on_one_vhost_keep_their_own_queues(amqp: Settings) -> None:
    other = dataclasses.replace(amqp, namespace=f"{amqp.namespace}-other")
    ours, theirs = make_broker(amqp), make_broker(other)
    try:
        Publisher(ours)(Priority.BULK, [[1, 2], [3]])
        Publisher(theirs)(Priority.HIGH, [[9]])
        assert depth(amqp.broker_url, wire_name(amqp.namespace, "email_bulk")) == 2
        assert depth(amqp.broker_url, wire_name(other.namespace, "email_bulk"), missing=0) == 0
        assert depth(amqp.broker_url, "email_bulk", missing=0) == 0  # no bare, shared name
        # A worker of the other outbox consumes its own message and none of ours.
        assert _drain(theirs, "email_bulk") == []
        assert _drain(theirs, "email_high") == [[[9]]]
        assert _drain(ours, "email_bulk") == [[[1, 2]], [[3]]]
    finally:
        ours.close()
        theirs.close()


@pytest.mark.rabbitmq
def test_a_run_that_owns_its_namespace_leaves_no_queue_behind(amqp: Settings) -> None:
    broker = make_broker(amqp)
    try:
        Publisher(broker)(Priority.HIGH, [[1]])
        Publisher(broker)(Priority.BULK, [[2]])
    finally:
        broker.close()
    assert drop_namespace(amqp, amqp.namespace) == []
    for queue in queues(amqp.namespace):
        assert depth(amqp.broker_url, queue, missing=-1) == -1, queue  # gone


def _drain(broker: dramatiq.Broker, queue: str) -> list[list[object]]:
    """The args of every message ``broker``'s consumer of ``queue`` gets, each acknowledged."""
    consumer = broker.consume(queue, prefetch=10, timeout=500)
    got = []
    try:
        while (message := next(consumer)) is not None:
            assert message.queue_name == queue  # Dramatiq's name inside the process
            got.append(list(message.args))
            consumer.ack(message)
    finally:
        consumer.close()
    return got


@pytest.mark.rabbitmq
def test_outbox_status_on_rabbitmq_shows_its_queues_and_no_pika_chatter(amqp: Settings) -> None:
    env = {**os.environ, **amqp.to_env(), "OUTBOX_LOG_LEVEL": "INFO"}
    run = subprocess.run(
        [sys.executable, "-m", "outbox.cli", "status"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    assert "pika" not in run.stdout + run.stderr, run.stderr
    assert "broker     up" in run.stdout, run.stdout  # no queue declared yet is no outage


def _env(settings: Settings, sink: SmtpSink) -> dict[str, str]:
    return {**dataclasses.replace(settings, smtp_url=sink.url).to_env(), "OUTBOX_LOG_LEVEL": "INFO"}


@pytest.mark.rabbitmq
@pytest.mark.slow
def test_a_rabbitmq_restart_mid_drain_leaves_nothing_for_the_sweeper(
    amqp: Settings, tmp_path: Path
) -> None:
    # A sweeper threshold far beyond the test: every email must come from the
    # broker's own durable copy, none from the sweeper.
    slow_sweeper = dataclasses.replace(amqp, stuck_seconds=3600.0, sweep_interval=3600.0)
    add_newsletter(slow_sweeper, 1500)
    with (
        SmtpSink() as sink,
        Pipeline(_env(slow_sweeper, sink), high=(1, 2), bulk=(1, 4), log_dir=tmp_path),
    ):
        wait_until(lambda: len(sink.messages) >= 100, timeout=60)
        rabbitmqctl("stop_app")
        try:
            time.sleep(2)
        finally:
            rabbitmqctl("start_app")
        wait_until(lambda: statuses(slow_sweeper) == {"sent": 1500}, timeout=120)
    ids = sink.message_ids()
    assert len(set(ids)) == 1500
    swept = query(slow_sweeper, "SELECT count(*) FROM email_event WHERE reason LIKE 'swept%'")[0][0]
    assert swept == 0
    assert depth(amqp.broker_url, wire_name(amqp.namespace, "email_bulk")) == 0
