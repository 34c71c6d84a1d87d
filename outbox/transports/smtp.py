"""SMTP submission with one reused connection per thread.

The conversation is driven command by command (not ``smtplib.sendmail``) so
that a failure is known by its :class:`~outbox.models.Stage`: a connection
lost after the end-of-data dot is an *uncertain* delivery, one lost before it
is a plain retry.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import smtplib
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.models import RecipientReply, Reply, Stage
from outbox.transports.base import OutgoingMessage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    implicit_tls: bool = False
    username: str | None = None
    password: str | None = None
    starttls: str = "opportunistic"  # never | opportunistic | required
    connect_timeout: float = 10.0
    command_timeout: float = 60.0
    # A whole attempt, however the relay trickles its replies; 0: connect + 2 * command.
    attempt_timeout: float = 0.0
    local_hostname: str | None = None
    ca_file: str | None = None  # trust this CA bundle instead of the system's
    # Credentials without TLS: "never", or "loopback" (a relay on this host only).
    plaintext_auth: str = "never"

    @classmethod
    def from_url(cls, url: str, **options: object) -> SmtpConfig:
        """``smtp://user:pass@host:port`` or ``smtps://…`` (implicit TLS)."""
        shape = "SMTP_URL must look like smtp://[user:pass@]host[:port] or smtps://…"
        try:
            parts = urlsplit(url)
            hostname, port = parts.hostname, parts.port
        except ValueError:
            # urllib's message quotes the URL's netloc, and with it the password.
            raise ConfigError(f"{shape} (its host or port cannot be read)") from None
        if parts.scheme not in {"smtp", "smtps"} or not hostname:
            raise ConfigError(shape)
        implicit_tls = parts.scheme == "smtps"
        return cls(
            host=hostname,
            port=port or (465 if implicit_tls else 25),
            implicit_tls=implicit_tls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            **options,  # type: ignore[arg-type]
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpConfig:
        return cls.from_url(
            settings.smtp_url,
            starttls=settings.smtp_starttls,
            connect_timeout=settings.smtp_connect_timeout,
            command_timeout=settings.smtp_command_timeout,
            attempt_timeout=settings.smtp_attempt_timeout,
            ca_file=settings.smtp_ca_file or None,
            plaintext_auth=settings.smtp_plaintext_auth,
        )

    def __repr__(self) -> str:  # never print the password
        return f"SmtpConfig({self.host}:{self.port}, tls={self.implicit_tls}, user={self.username})"


class _Failed(Exception):
    """Ends a conversation early with the reply to report."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply


class SmtpTransport:
    def __init__(self, config: SmtpConfig) -> None:
        self.config = config
        self._local = threading.local()
        # Every thread's connection, so that close() can end them all.
        self._open_connections: set[smtplib.SMTP] = set()
        self._registry_lock = threading.Lock()
        self._deadlines = _Deadlines()
        self._tls_context: ssl.SSLContext | None = None

    def _tls(self) -> ssl.SSLContext:
        # Loading the CA bundle costs tens of milliseconds: once per transport.
        if self._tls_context is None:
            self._tls_context = ssl.create_default_context(cafile=self.config.ca_file or None)
        return self._tls_context

    def send(self, message: OutgoingMessage) -> Reply:
        config = self.config
        limit = config.attempt_timeout or config.connect_timeout + 2 * config.command_timeout
        watch = self._local.watch = self._deadlines.start(limit)
        watch.smtp = getattr(self._local, "smtp", None)
        try:
            reused = watch.smtp is not None
            reply = self._send_once(message)
            # A reused connection the relay closed while idle fails before any
            # message byte left; one fresh try is safe and spares an attempt.
            if reused and reply.code is None and reply.stage in (Stage.MAIL, Stage.CONNECT):
                reply = self._send_once(message)
        finally:
            self._deadlines.end(watch)
        if watch.expired and reply.code is None:
            # Socket timeouts count per read; a relay answering a byte at a
            # time never trips them. The attempt's own deadline shut it.
            return Reply(reply.stage, error=f"timeout: attempt took longer than {limit:.0f}s")
        return reply

    def close(self) -> None:
        """End every thread's connection (at shutdown)."""
        with self._registry_lock:
            connections, self._open_connections = self._open_connections, set()
        self._local = threading.local()
        for smtp in connections:
            try:
                smtp.quit()
            except (smtplib.SMTPException, OSError):
                smtp.close()

    def _send_once(self, message: OutgoingMessage) -> Reply:
        stage = Stage.CONNECT
        try:
            smtp = getattr(self._local, "smtp", None)
            if smtp is None:
                smtp = self._local.smtp = self._open()
                with self._registry_lock:
                    self._open_connections.add(smtp)
            stage = Stage.MAIL
            reply = self._transaction(smtp, message)
        except _Failed as failed:
            self._discard()
            return failed.reply
        except (smtplib.SMTPException, OSError) as exc:
            self._discard()
            return Reply(getattr(exc, "stage", stage), error=_describe(exc))
        if reply.code is not None and not 200 <= reply.code < 300:
            self._reset()
        return reply

    def _open(self) -> smtplib.SMTP:
        config = self.config
        context = self._tls()
        smtp: smtplib.SMTP
        if config.implicit_tls:
            smtp = smtplib.SMTP_SSL(
                local_hostname=config.local_hostname,
                timeout=config.connect_timeout,
                context=context,
            )
        else:
            smtp = smtplib.SMTP(
                local_hostname=config.local_hostname, timeout=config.connect_timeout
            )
        # smtplib only records the host for STARTTLS's certificate check when
        # it connects from its constructor, which would hide the failing stage.
        smtp._host = config.host  # type: ignore[attr-defined]
        watch = getattr(self._local, "watch", None)
        if watch is not None:
            watch.smtp = smtp  # from now on the deadline can cut this connection
        try:
            code, text = _with_stage(Stage.CONNECT, smtp.connect, config.host, config.port)
            if code != 220:
                raise _Failed(Reply(Stage.GREETING, code, _text(text)))
            assert smtp.sock is not None
            smtp.sock.settimeout(config.command_timeout)
            self._hello(smtp)
            if not config.implicit_tls:
                self._starttls(smtp, context)
            if config.username:
                self._check_credentials_protected(smtp)
                try:
                    _with_stage(Stage.AUTH, smtp.login, config.username, config.password or "")
                except smtplib.SMTPAuthenticationError as exc:
                    raise _Failed(Reply(Stage.AUTH, exc.smtp_code, _text(exc.smtp_error))) from None
        except BaseException:
            smtp.close()
            raise
        return smtp

    def _check_credentials_protected(self, smtp: smtplib.SMTP) -> None:
        """AUTH PLAIN and LOGIN carry the password as base64: only inside TLS.

        With ``opportunistic`` STARTTLS a relay (or anyone between) that does
        not offer STARTTLS would otherwise receive the password in clear.
        """
        config = self.config
        if isinstance(smtp.sock, ssl.SSLSocket):
            return
        if config.plaintext_auth == "loopback" and is_loopback(config.host):
            return
        raise _Failed(
            Reply(
                Stage.STARTTLS,
                error="no TLS: the relay did not offer STARTTLS, and credentials are never sent "
                "in clear (OUTBOX_SMTP_PLAINTEXT_AUTH=loopback allows it for a relay on this host)",
            )
        )

    def _hello(self, smtp: smtplib.SMTP) -> None:
        code, text = _with_stage(Stage.EHLO, smtp.ehlo)
        if code != 250:
            code, text = _with_stage(Stage.EHLO, smtp.helo)
            if code != 250:
                raise _Failed(Reply(Stage.EHLO, code, _text(text)))

    def _starttls(self, smtp: smtplib.SMTP, context: ssl.SSLContext) -> None:
        policy = self.config.starttls
        if policy == "never":
            return
        if not smtp.has_extn("starttls"):
            if policy == "required":
                raise _Failed(Reply(Stage.STARTTLS, error="relay does not offer STARTTLS"))
            return
        code, text = _with_stage(Stage.STARTTLS, smtp.starttls, context=context)
        if code != 220:
            raise _Failed(Reply(Stage.STARTTLS, code, _text(text)))
        self._hello(smtp)

    def _transaction(self, smtp: smtplib.SMTP, message: OutgoingMessage) -> Reply:
        """MAIL, RCPT, DATA, the message, its final reply."""
        if message.smtputf8 and not smtp.has_extn("smtputf8"):
            # What a relay would answer (RFC 6531 section 3.5), said locally.
            return Reply(Stage.MAIL, 553, "5.6.7 the relay does not offer SMTPUTF8")
        envelope = _Envelope(message)
        replies = self._envelope_replies(smtp, envelope)
        refused = envelope.refusal(replies)
        if refused is not None:
            if replies[-1][1] == 354:
                # DATA was accepted although an earlier command failed
                # (RFC 2920 section 3.1): end it empty, send nothing.
                _with_stage(Stage.DATA, smtp.send, b".\r\n")
                _with_stage(Stage.DATA, smtp.getreply)
            return refused
        each = _each(message, envelope.copies, replies)
        if message.before_commit is not None:
            message.before_commit()
        _with_stage(Stage.BODY, smtp.send, _dot_stuffed(message.data))
        code, text = _with_stage(Stage.FINAL_REPLY, smtp.getreply)
        return Reply(Stage.FINAL_REPLY, code, _text(text), recipients=each)

    def _envelope_replies(
        self, smtp: smtplib.SMTP, envelope: _Envelope
    ) -> list[tuple[Stage, int, bytes]]:
        """The replies to MAIL, each RCPT and DATA. Addresses were validated at
        enqueue, so the commands are written directly (smtplib's re-parsing
        costs more than the rest of a send). With PIPELINING (RFC 2920) the
        commands go in one write; without, a required one refused ends them."""
        commands = envelope.commands
        if smtp.has_extn("pipelining"):
            _with_stage(Stage.MAIL, smtp.send, b"".join(command for _, command in commands))
            return [(stage, *_with_stage(stage, smtp.getreply)) for stage, _ in commands]
        replies = []
        for (stage, command), needed in zip(commands, envelope.required, strict=True):
            _with_stage(stage, smtp.send, command)
            replies.append((stage, *_with_stage(stage, smtp.getreply)))
            if needed and replies[-1][1] not in (250, 251, 354):
                break
        return replies

    def _reset(self) -> None:
        smtp = getattr(self._local, "smtp", None)
        if smtp is None:
            return
        try:
            code, _ = smtp.rset()
            if code == 250:
                return
        except (smtplib.SMTPException, OSError):
            pass
        self._discard()

    def _discard(self) -> None:
        smtp = getattr(self._local, "smtp", None)
        self._local.smtp = None
        if smtp is not None:
            with self._registry_lock:
                self._open_connections.discard(smtp)
            smtp.close()


class _Envelope:
    """A message's envelope commands, which of them it cannot do without (the
    message stands or falls with its `to`: a cc or bcc refused is left out),
    and the replies each accepts."""

    def __init__(self, message: OutgoingMessage) -> None:
        encoding = "utf-8" if message.smtputf8 else "ascii"
        options = " SMTPUTF8 BODY=8BITMIME" if message.smtputf8 else ""
        self.copies = [(a, "cc") for a in message.cc] + [(a, "bcc") for a in message.bcc]
        self.commands = [
            (Stage.MAIL, f"MAIL FROM:<{message.envelope_from}>{options}\r\n".encode(encoding)),
            (Stage.RCPT, f"RCPT TO:<{message.recipient}>\r\n".encode(encoding)),
            *((Stage.RCPT, f"RCPT TO:<{a}>\r\n".encode(encoding)) for a, _ in self.copies),
            (Stage.DATA, b"DATA\r\n"),
        ]
        self.required = [True, True, *(False for _ in self.copies), True]
        self.accepted = [(250,), (250, 251), *((250, 251) for _ in self.copies), (354,)]
        self.message = message

    def refusal(self, replies: list[tuple[Stage, int, bytes]]) -> Reply | None:
        """The reply that ends the transaction before the data, if any."""
        for (stage, code, text), accepts, needed in zip(
            replies, self.accepted, self.required, strict=False
        ):
            if needed and code not in accepts:
                recipients = _each(self.message, self.copies, replies)
                return Reply(stage, code, _text(text), recipients=recipients)
        return None


class _Watch:
    __slots__ = ("deadline", "expired", "smtp")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self.smtp: smtplib.SMTP | None = None


class _Deadlines:
    """One thread per transport that cuts attempts past their deadline.

    Shutting the socket ends whatever read or write is in progress with an
    error; the attempt then reports a timeout at the stage it had reached.
    A thread per attempt would cost more than the rest of a send.
    """

    TICK = 0.2  # seconds between checks: the deadline's precision

    def __init__(self) -> None:
        self._watches: set[_Watch] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self, seconds: float) -> _Watch:
        watch = _Watch(time.monotonic() + seconds)
        with self._lock:
            self._watches.add(watch)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="smtp-deadlines", daemon=True
                )
                self._thread.start()
        return watch

    def end(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def _run(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                overdue = [w for w in self._watches if w.deadline <= now and not w.expired]
                for watch in overdue:
                    watch.expired = True
            for watch in overdue:
                sock = watch.smtp.sock if watch.smtp is not None else None
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)


def _with_stage(stage: Stage, call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Run one step, tagging any exception with the stage it happened in."""
    try:
        return call(*args, **kwargs)
    except (smtplib.SMTPException, OSError) as exc:
        if not hasattr(exc, "stage"):
            exc.stage = stage  # type: ignore[attr-defined]
        raise


def _each(
    message: OutgoingMessage, copies: list[tuple[str, str]], replies: list[tuple[Stage, int, bytes]]
) -> tuple[RecipientReply, ...]:
    """Each recipient's RCPT reply, when the message has more than one."""
    if not copies:
        return ()
    rcpts = [r for r in replies[1:] if r[0] is Stage.RCPT]
    addressed = [(message.recipient, "to"), *copies]
    return tuple(
        RecipientReply(address, kind, code, _text(text))
        for (address, kind), (_, code, text) in zip(addressed, rcpts, strict=False)
    )


def _dot_stuffed(data: bytes) -> bytes:
    """RFC 5321 section 4.5.2 transparency, plus the end-of-data line."""
    stuffed = data.replace(b"\r\n.", b"\r\n..")
    if stuffed.startswith(b"."):
        stuffed = b"." + stuffed
    if not stuffed.endswith(b"\r\n"):
        stuffed += b"\r\n"
    return stuffed + b".\r\n"


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _describe(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return "timeout" if "timed out" in str(exc) else "connection closed"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return f"tls: {exc}"
    if isinstance(exc, socket.gaierror):
        return f"dns: {exc}"
    return f"{type(exc).__name__}: {exc}"
