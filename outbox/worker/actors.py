"""Thin send actors: one per queue, both calling :mod:`outbox.delivery.deliver`."""

from __future__ import annotations

import threading
from functools import cache

import dramatiq

from outbox.broker import queue_name
from outbox.config import default_settings
from outbox.db import store
from outbox.delivery.deliver import Delivery
from outbox.models import Priority
from outbox.pacing.pacer import pacer_for
from outbox.transports.select import build_transport

# Set by the shutdown middleware; a batch in progress hands back what it has
# not tried instead of outliving the platform's grace period.
stopping = threading.Event()


@cache
def delivery() -> Delivery:
    """Per process (created after the worker forks): pool, transport, templates."""
    settings = default_settings()
    pool = store.Pool(
        settings.database_url,
        name="outbox-worker",
        max_size=16,
        prepare=settings.prepared_statements == "on",
    )
    transport = build_transport(settings)  # OUTBOX_TRANSPORT: SMTP or an HTTP provider
    pacer = pacer_for(settings)  # OUTBOX_RATE_LIMITS, OUTBOX_SEND_RATE: shared through Redis
    return Delivery(settings, pool, transport, stopping=stopping, pacer=pacer)


# No max_retries: the Retries middleware is removed (outbox.broker), the row owns retries.
# The time limit is a last resort; delivery stops a batch at half the sweeper's threshold.
_TIME_LIMIT_MS = int(default_settings().stuck_seconds * 1000)


@dramatiq.actor(
    queue_name=queue_name(Priority.HIGH), actor_name="deliver_high", time_limit=_TIME_LIMIT_MS
)
def deliver_high(ids: list[int]) -> None:
    delivery().deliver(ids)


@dramatiq.actor(
    queue_name=queue_name(Priority.BULK), actor_name="deliver_bulk", time_limit=_TIME_LIMIT_MS
)
def deliver_bulk(ids: list[int]) -> None:
    delivery().deliver(ids)


def warm_up() -> None:
    """Open the pool and compile every template before the first message."""
    templates = delivery().templates
    for name in templates.names():
        templates.get(name)
