"""The send workers: ``dramatiq outbox.worker -Q email_high`` (or ``email_bulk``).

Importing this package checks the worker's settings and builds what it sends
with before any actor exists, then installs the broker (``@dramatiq.actor``
binds to the global broker when the actor module is imported). A setting the
worker cannot work with ends the import with one line naming it: dramatiq then
exits non-zero instead of reporting "ready for action".
"""

from __future__ import annotations

import dramatiq

from outbox import redact
from outbox.broker import make_broker, queue_name
from outbox.models import Priority
from outbox.preflight import settings_or_exit
from outbox.telemetry.worker_metrics import add_worker_metrics
from outbox.worker import broker_outage

settings = settings_or_exit("worker")
redact.install(settings)  # dramatiq set up the handlers before importing us
broker = make_broker(settings)
broker_outage.install(broker, [queue_name(p) for p in Priority])
add_worker_metrics(broker)  # only for a pool started with dramatiq_prom_db
dramatiq.set_broker(broker)

from outbox.worker import actors  # noqa: E402  (after the broker, on purpose)
from outbox.worker.middleware import (  # noqa: E402
    Farewell,
    Liveness,
    ShutdownSignal,
    Tracing,
    Warmup,
)

broker.add_middleware(ShutdownSignal(actors.stopping))
broker.add_middleware(Tracing("outbox-worker"))
broker.add_middleware(Warmup(actors.warm_up))
broker.add_middleware(Farewell(actors.leave))
broker.add_middleware(Liveness(actors.report_liveness, actors.stop_reporting))

__all__ = ["actors", "broker", "settings"]
