"""A recording SMTP server on loopback, for the demo and the tests.

Built on aiosmtpd. Each recipient can be given a behaviour (a reply at RCPT
or after DATA, a dropped connection after the message arrived, a stall) so
that every branch of classification can be driven against a real server.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from typing import Any

from aiosmtpd.controller import Controller

# aiosmtpd logs every command at INFO; a sink under load would drown the output.
logging.getLogger("mail.log").setLevel(logging.WARNING)


@dataclass(frozen=True)
class Behaviour:
    rcpt_reply: str | None = None  # e.g. "550 5.1.1 no such user"; None accepts
    data_reply: str | None = None  # reply after the message; None: 250 with a queue id
    drop_after_data: bool = False  # keep the message, never answer: an uncertain delivery
    delay: float = 0.0  # seconds to wait before the final reply


ACCEPT = Behaviour()


@dataclass
class Received:
    mail_from: str
    recipients: list[str]
    message_id: str | None
    data: bytes
    at: float = field(default_factory=time.monotonic)


class _Handler:
    def __init__(self, sink: SmtpSink) -> None:
        self.sink = sink

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        # Decided once per transaction: the DATA stage follows the same behaviour.
        behaviour = self.sink.behaviour(address)
        if behaviour.rcpt_reply:
            return behaviour.rcpt_reply
        envelope.behaviour = behaviour
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        data: bytes = envelope.original_content or envelope.content
        behaviour: Behaviour = getattr(envelope, "behaviour", ACCEPT)
        if behaviour.delay:
            await asyncio.sleep(behaviour.delay)
        if behaviour.data_reply and not behaviour.data_reply.startswith("2"):
            self.sink.refused += 1
            return behaviour.data_reply
        headers = BytesHeaderParser().parsebytes(data)
        received = Received(
            envelope.mail_from, list(envelope.rcpt_tos), headers["Message-ID"], data
        )
        queue_id = self.sink.record(received)
        if behaviour.drop_after_data:
            # Gone without a word: aiosmtpd cancels this handler when the
            # connection is lost, so no reply is ever written.
            server.transport.abort()
            await asyncio.sleep(30)
            return "421 4.4.2 closing"
        return behaviour.data_reply or f"250 2.0.0 Ok: queued as {queue_id}"


class SmtpSink:
    """Start with :meth:`start` (or as a context manager); inspect :attr:`messages`."""

    def __init__(
        self,
        behaviour: Callable[[str], Behaviour] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        smtputf8: bool = True,
    ) -> None:
        self.behaviour = behaviour or (lambda _address: ACCEPT)
        self.host = host
        self.port = port or _free_port(host)
        self.messages: list[Received] = []
        self.refused = 0
        self.smtputf8 = smtputf8
        self._lock = threading.Lock()
        self._controller: Controller | None = None

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    def record(self, received: Received) -> str:
        with self._lock:
            self.messages.append(received)
            return f"Q{len(self.messages):08d}"

    def message_ids(self) -> list[str | None]:
        with self._lock:
            return [m.message_id for m in self.messages]

    def start(self) -> SmtpSink:
        self._controller = Controller(
            _Handler(self),
            hostname=self.host,
            port=self.port,
            enable_SMTPUTF8=self.smtputf8,
            ready_timeout=10,
        )
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller.loop.close()
            self._controller = None

    def __enter__(self) -> SmtpSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port
