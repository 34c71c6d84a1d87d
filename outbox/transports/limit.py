"""At most N sends at once through one transport, per process.

Providers cap concurrent connections per account or API key (and some relays
per client); past the cap they answer 429 or refuse connections, which only
turns into retries. A worker process runs many threads, so the cap is a
semaphore in front of the transport. Every send is bounded by the
transport's own timeouts, so a waiting thread waits at most that long per
send ahead of it.
"""

from __future__ import annotations

import threading

from outbox.models import Reply
from outbox.transports.base import OutgoingMessage, Transport


class Limited:
    def __init__(self, transport: Transport, limit: int) -> None:
        if limit < 1:
            raise ValueError("a concurrency limit is at least 1")
        self.transport = transport
        self.limit = limit
        self._slots = threading.BoundedSemaphore(limit)

    def send(self, message: OutgoingMessage) -> Reply:
        with self._slots:
            return self.transport.send(message)

    def close(self) -> None:
        self.transport.close()
