"""A scripted HTTP server on loopback that the provider fakes build on.

Each fake answers requests the way its provider documents, and a test can
put steps in front of that: an :class:`Answer` given instead of processing
(a 429, a 500), or :class:`Slow`, which processes the request (the message
is accepted) and answers only after a delay, past the client's timeout.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Answer:
    """Answer this instead of processing the request."""

    status: int
    body: Any = None  # JSON
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Slow:
    """Process the request, then wait this long before answering."""

    seconds: float


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes
    at: float

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class FakeProvider:
    """Subclasses implement :meth:`process` by the provider's documentation."""

    def __init__(self, *, latency: float = 0.0) -> None:
        self.latency = latency  # every answer waits this long (to observe concurrency)
        self.requests: list[Request] = []
        self.script: deque[Answer | Slow] = deque()
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def process(self, request: Request, delay: float) -> Response:
        raise NotImplementedError

    def then(self, *steps: Answer | Slow) -> None:
        self.script.extend(steps)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def dispatch(self, request: Request) -> Response:
        with self._lock:
            self.requests.append(request)
            step = self.script.popleft() if self.script else None
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.latency)
            if isinstance(step, Answer):
                return Response(step.status, step.body, dict(step.headers))
            return self.process(request, step.seconds if isinstance(step, Slow) else 0.0)
        finally:
            with self._lock:
                self.in_flight -= 1

    def start(self) -> FakeProvider:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the real APIs

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    method="POST",
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length),
                    at=time.monotonic(),
                )
                response = fake.dispatch(request)
                body = b"" if response.body is None else json.dumps(response.body).encode()
                with contextlib.suppress(OSError):  # the client may have given up
                    self.send_response(response.status)
                    for name, value in response.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
