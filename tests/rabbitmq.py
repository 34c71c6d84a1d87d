"""RabbitMQ of this machine, one virtual host per test session.

Each test's queues carry its own OUTBOX_NAMESPACE (``<namespace>.email_high``),
as they would for two deployments on one virtual host; the session's virtual
host keeps test sessions apart.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

import pika
import pika.exceptions
import pytest

from outbox.rabbitmq_queues import wire_name

START_RABBITMQ = "start it with `rabbitmq-server -detached`"


def queues(namespace: str) -> list[str]:
    """Every RabbitMQ queue an outbox of ``namespace`` declares."""
    return [
        wire_name(namespace, f"email_{p}{suffix}")
        for p in ("high", "bulk")
        for suffix in ("", ".DQ", ".XQ")
    ]


def _ctl(*args: str) -> None:
    try:
        subprocess.run(["rabbitmqctl", "-q", *args], check=True, timeout=120, capture_output=True)
    except FileNotFoundError:
        pytest.fail("rabbitmqctl is missing: apt-get install rabbitmq-server (./dev test does)")
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"rabbitmqctl {' '.join(args)} failed: {exc.stderr!r}; {START_RABBITMQ}")


@contextmanager
def private_vhost() -> Iterator[str]:
    """The amqp:// URL of a virtual host of this session's own, deleted at the end."""
    name = f"outbox-test-{uuid.uuid4().hex[:8]}"
    _ctl("add_vhost", name)
    try:
        _ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        url = f"amqp://guest:guest@127.0.0.1:5672/{quote(name, safe='')}"
        connect(url).close()
        yield url
    finally:
        _ctl("delete_vhost", name)


def connect(url: str) -> pika.BlockingConnection:
    try:
        return pika.BlockingConnection(pika.URLParameters(url))
    except pika.exceptions.AMQPConnectionError as exc:
        pytest.fail(f"RabbitMQ at 127.0.0.1:5672 does not answer ({exc!r}); {START_RABBITMQ}")


def empty_queues(url: str, namespace: str) -> None:
    connection = connect(url)
    try:
        channel = connection.channel()
        for queue in queues(namespace):
            channel.queue_delete(queue=queue)
    finally:
        connection.close()


def depth(url: str, queue: str, *, missing: int | None = None) -> int:
    """Messages ready in ``queue``; ``missing`` when it was never declared (else an error)."""
    connection = connect(url)
    try:
        declared = connection.channel().queue_declare(queue=queue, passive=True)
        return int(declared.method.message_count)
    except pika.exceptions.ChannelClosedByBroker as exc:
        if missing is None or exc.reply_code != 404:
            raise
        return missing
    finally:
        if connection.is_open:
            connection.close()


def rabbitmqctl(command: str) -> None:
    _ctl(command)
