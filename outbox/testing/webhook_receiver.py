"""A Standard Webhooks receiver on loopback, for tests and benchmarks: it
verifies every request's signature with the ``standardwebhooks`` package and
answers what it is told to (200, a 503 while "down", 410...)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from standardwebhooks.webhooks import (
    EmptyWebhookSecretError,
    Webhook,
    WebhookVerificationError,
)


@dataclass(frozen=True, slots=True)
class Delivered:
    webhook_id: str
    payload: dict[str, Any]


class WebhookReceiver:
    """Start with :meth:`start` or as a context manager; set :attr:`secret` to
    verify, :attr:`status` to answer, :attr:`delay` to answer late."""

    def __init__(self, *, secret: str = "", status: int = 200, delay: float = 0.0) -> None:
        self.secret = secret
        self.status = status
        self.delay = delay
        self.delivered: list[Delivered] = []  # verified and answered 2xx, in arrival order
        self.attempts: list[str] = []  # the webhook-id of every request
        self.unverified = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                status = receiver.receive(body, {k.lower(): v for k, v in self.headers.items()})
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/outbox"

    def receive(self, body: bytes, headers: dict[str, str]) -> int:
        if self.delay:
            time.sleep(self.delay)
        webhook_id = headers.get("webhook-id", "")
        with self._lock:
            self.attempts.append(webhook_id)
            status = self.status
        try:
            Webhook(self.secret).verify(body, headers)
        except (WebhookVerificationError, EmptyWebhookSecretError, ValueError):
            with self._lock:
                self.unverified += 1
            return 401
        if 200 <= status < 300:
            with self._lock:
                self.delivered.append(Delivered(webhook_id, orjson.loads(body)))
        return status

    def ids(self) -> list[str]:
        with self._lock:
            return [d.webhook_id for d in self.delivered]

    def start(self) -> WebhookReceiver:
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
