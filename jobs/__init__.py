"""Dramatiq side of Outbox: ``dramatiq jobs -Q email_high`` starts send workers.

Importing this package installs the broker first, because ``@dramatiq.actor``
binds to the global broker when the actor module is imported.
"""

from __future__ import annotations

from jobs.queues import install
from outbox.config import default_settings

broker = install(default_settings())

from jobs import actors  # noqa: E402  (after the broker, on purpose)
from jobs.middleware import ShutdownSignal, Tracing, Warmup  # noqa: E402

broker.add_middleware(ShutdownSignal(actors.stopping))
broker.add_middleware(Tracing("outbox-worker"))
broker.add_middleware(Warmup(actors.warm_up))

__all__ = ["actors", "broker"]
