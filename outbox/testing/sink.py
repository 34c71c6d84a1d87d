"""A recording SMTP server on loopback, for the demo and the tests.

Built on aiosmtpd. Each recipient can be given a behaviour (a reply at RCPT
or after DATA, a dropped connection after the message arrived, a stall) so
that every branch of classification can be driven against a real server.
:class:`SlowLink` puts a misbehaving network in front of any SMTP server: one
that accepts connections and never says a word, or one that answers a byte
at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
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
    # Keep the message, then wait this long before the final reply: the window
    # in which the sender has been accepted but does not know it yet.
    stall_after_record: float = 0.0


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
        if behaviour.stall_after_record:
            self.sink.note_stall(list(envelope.rcpt_tos))
            await asyncio.sleep(behaviour.stall_after_record)
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
        **server_options: Any,
    ) -> None:
        """``server_options`` go to aiosmtpd's SMTP: ``tls_context``,
        ``require_starttls``, ``authenticator``, ``auth_required``…"""
        self.behaviour = behaviour or (lambda _address: ACCEPT)
        self.host = host
        self.port = port or _free_port(host)
        self.messages: list[Received] = []
        self.refused = 0
        self.smtputf8 = smtputf8
        self.server_options = server_options
        self.stalled: list[str] = []  # recipients of messages kept and not yet answered
        self._lock = threading.Lock()
        self._stall = threading.Condition(self._lock)
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

    def note_stall(self, recipients: list[str]) -> None:
        with self._stall:
            self.stalled.extend(recipients)
            self._stall.notify_all()

    def wait_for_stalls(self, count: int, timeout: float) -> list[str]:
        """Block until ``count`` stalls began (or ``timeout``); the stalled recipients."""
        with self._stall:
            self._stall.wait_for(lambda: len(self.stalled) >= count, timeout=timeout)
            return list(self.stalled)

    def start(self) -> SmtpSink:
        self._controller = Controller(
            _Handler(self),
            hostname=self.host,
            port=self.port,
            enable_SMTPUTF8=self.smtputf8,
            ready_timeout=10,
            **self.server_options,
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


class SlowLink:
    """A loopback TCP front for an SMTP server that misbehaves on purpose.

    ``mode`` is read when a connection arrives, so it can change mid-run:

    - ``"pass"``: bytes flow both ways as they come;
    - ``"silent"``: the connection is accepted and never answered;
    - ``"dribble"``: the client's bytes flow as they come, the server's reach
      the client one byte every ``byte_interval`` seconds.
    """

    MODES = ("pass", "silent", "dribble")

    def __init__(
        self,
        upstream_port: int,
        *,
        mode: str = "pass",
        byte_interval: float = 1.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if mode not in self.MODES:
            raise ValueError(f"mode must be one of {self.MODES}")
        self.upstream = (host, upstream_port)
        self.mode = mode
        self.byte_interval = byte_interval
        self.host = host
        self.port = port or _free_port(host)
        self.accepted: dict[str, int] = dict.fromkeys(self.MODES, 0)
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"smtp://{self.host}:{self.port}"

    def start(self) -> SlowLink:
        listener = socket.create_server((self.host, self.port), backlog=128)
        listener.settimeout(0.2)
        self._listener = listener
        self._spawn(self._accept_loop)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
            threads = list(self._threads)
        for sock in sockets:
            _close_quietly(sock)
        for thread in threads:
            thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    def __enter__(self) -> SlowLink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)
        if self._stop.is_set():
            _close_quietly(sock)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            mode = self.mode
            with self._lock:
                self.accepted[mode] += 1
            self._track(client)
            if mode == "silent":
                self._spawn(self._hold, client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close_quietly(client)
                continue
            self._track(server)
            interval = self.byte_interval if mode == "dribble" else 0.0
            self._spawn(self._pump, client, server, 0.0)
            self._spawn(self._pump, server, client, interval)

    def _hold(self, client: socket.socket) -> None:
        """Read and drop whatever the client says until it gives up."""
        client.settimeout(0.2)
        while not self._stop.is_set():
            try:
                if not client.recv(4096):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        _close_quietly(client)

    def _pump(self, source: socket.socket, target: socket.socket, interval: float) -> None:
        source.settimeout(0.2)
        try:
            while not self._stop.is_set():
                try:
                    data = source.recv(4096)
                except TimeoutError:
                    continue
                if not data:
                    break
                if not interval:
                    target.sendall(data)
                    continue
                for index in range(len(data)):
                    if self._stop.wait(interval):
                        return
                    target.sendall(data[index : index + 1])
        except OSError:
            pass
        finally:
            _close_quietly(source)
            _close_quietly(target)


def _close_quietly(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
