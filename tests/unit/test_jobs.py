from __future__ import annotations

from dramatiq.middleware import AgeLimit, Retries

import outbox.worker as jobs
from outbox.worker.middleware import ShutdownSignal, Tracing, Warmup


def test_the_row_owns_retries_not_dramatiq() -> None:
    kinds = {type(m) for m in jobs.broker.middleware}
    assert Retries not in kinds
    assert AgeLimit not in kinds
    assert {ShutdownSignal, Tracing, Warmup} <= kinds


def test_one_actor_per_queue() -> None:
    actors = {name: jobs.broker.get_actor(name) for name in ("deliver_high", "deliver_bulk")}
    assert actors["deliver_high"].queue_name == "email_high"
    assert actors["deliver_bulk"].queue_name == "email_bulk"
    assert {"email_high", "email_bulk"} <= jobs.broker.get_declared_queues()
