"""Dramatiq hooks that connect the worker's life cycle to delivery."""

from __future__ import annotations

import threading
from typing import Any

import dramatiq


class ShutdownSignal(dramatiq.Middleware):
    """Sets an event when the worker starts shutting down (SIGTERM)."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        self.event.set()
