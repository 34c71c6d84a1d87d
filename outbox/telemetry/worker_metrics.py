"""Dramatiq's own worker metrics (messages, errors, durations per queue) for Prometheus.

On only for a pool started with ``dramatiq_prom_db`` (and its own
``dramatiq_prom_port``), as in the Procfile: tests and the demo run without it.
Each worker process writes its figures to files in that directory, and one
exposition server per pool sums them, so two pools must never share it.
That server is started by Dramatiq's master process, from its environment:
``outbox worker`` sets ``dramatiq_prom_host`` (OUTBOX_METRICS_HOST), and a pool started
another way without it listens on every address (a warning says so).
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

import dramatiq

log = logging.getLogger(__name__)


def add_worker_metrics(broker: dramatiq.Broker) -> bool:
    """Add the middleware when the pool asks for it; True if added."""
    directory = os.environ.get("dramatiq_prom_db")  # noqa: SIM112 (Dramatiq reads this name)
    if not directory:
        return False
    # Imported only now: the module creates its directory when imported.
    from dramatiq.middleware.prometheus import Prometheus  # noqa: PLC0415

    if not os.environ.get("dramatiq_prom_host"):  # noqa: SIM112 (Dramatiq reads this name)
        log.warning(
            "dramatiq_prom_host is not set: the worker metrics listen on 0.0.0.0; "
            "start pools with `outbox worker`, or set it (127.0.0.1)"
        )
    broker.add_middleware(Prometheus())
    # Hooks run in reverse order after boot: this one empties the directory first.
    broker.add_middleware(FreshDirectory(Path(directory)))
    return True


class FreshDirectory(dramatiq.Middleware):
    """Empties the metrics directory once per pool start.

    Files left by an earlier run would be summed with this run's (counters that
    never reset, gauges of dead processes). The worker processes of one pool
    share a parent, the pool's master: the first of them to boot empties the
    directory, the others see the master's pid in the marker and leave it be.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        reset_once(self.directory, run=str(os.getppid()))


def reset_once(directory: Path, run: str) -> bool:
    """Delete the metric files unless ``run`` already did; True if deleted."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = directory / ".run"
        if marker.exists() and marker.read_text() == run:
            return False
        for stale in directory.glob("*.db"):
            stale.unlink(missing_ok=True)
        marker.write_text(run)
        return True
