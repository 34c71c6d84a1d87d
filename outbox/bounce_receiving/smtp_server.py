"""``outbox bounces serve``: an SMTP server that receives bounces and complaints.

It accepts mail only for the bounce domain (anything else: 550, never an open
relay), stores the raw message in Postgres and commits, and only then answers
250; processing runs afterwards from the stored copy, one message at a time,
each parsed in a child process within a deadline (outbox.bounce_receiving.
parse_worker) so that no message can stop the SMTP event loop. It listens
before it works through what was left unprocessed at its last stop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AnyStr
from wsgiref.simple_server import WSGIServer

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP
from prometheus_client import Counter, start_http_server

from outbox.bounce_receiving.budget import PeerBudget
from outbox.bounce_receiving.ingest import process_or_set_aside, process_pending
from outbox.bounce_receiving.parse_worker import ParseWorker
from outbox.config import Settings
from outbox.db.store import bounce_reports, connections
from outbox.errors import ConfigError, OutboxError
from outbox.message.return_path import row_token_from_address
from outbox.telemetry import liveness
from outbox.telemetry.listen_ports import ensure_free

log = logging.getLogger(__name__)
# aiosmtpd logs every command at INFO ("sender: …") and every DATA line at
# DEBUG: addresses and report contents in clear. Its warnings still show.
logging.getLogger("mail.log").setLevel(logging.WARNING)
MAX_BOUNCE_BYTES = 10 * 2**20  # a bounce may quote the whole original; past this it is not one


# Every refusal of input, by reason: a flood shows here before it shows anywhere else.
REFUSED = Counter(
    "outbox_bounce_refused",
    "Input the bounce server refused, by reason",
    ["reason"],
)
REASONS = ("relaying", "recipients", "messages", "peer_budget", "size")
for _reason in REASONS:
    REFUSED.labels(_reason)  # present at 0 from the start


class _SizeCountingSMTP(SMTP):
    """aiosmtpd answers 552 itself, before any handler hook, to a message larger
    than the limit (declared with SIZE at MAIL, or found during DATA): it is
    counted on its way out, as every other refusal is."""

    async def push(self, status: AnyStr) -> None:
        code = status[:3]
        if code in ("552", b"552"):
            REFUSED.labels("size").inc()
        await super().push(status)


class _Controller(Controller):
    def factory(self) -> SMTP:
        return _SizeCountingSMTP(self.handler, **self.SMTP_kwargs)


class _Handler:
    def __init__(self, server: BounceServer) -> None:
        self.server = server

    def _refuse(self, reason: str, reply: str) -> str:
        REFUSED.labels(reason).inc()
        return reply

    async def handle_MAIL(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        settings = self.server.settings
        session.outbox_messages = getattr(session, "outbox_messages", 0) + 1
        if session.outbox_messages > settings.bounce_max_messages:
            return self._refuse("messages", "421 4.7.0 too many messages on one connection")
        if self.server.budget.exhausted(_peer(session)):
            return self._refuse("peer_budget", "451 4.7.1 too much mail from you; try later")
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 OK"

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        domain = address.rpartition("@")[2].lower()
        if domain != self.server.settings.bounce_domain.lower():
            return self._refuse(
                "relaying", "550 5.7.1 relaying denied: this server only takes bounces"
            )
        if len(envelope.rcpt_tos) >= self.server.settings.bounce_max_recipients:
            # RFC 5321 section 4.5.3.1.10: 452, and the sender retries the rest.
            return self._refuse("recipients", "452 4.5.3 too many recipients")
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw: bytes = envelope.original_content or envelope.content
        if not self.server.budget.take(_peer(session), len(raw)):
            return self._refuse("peer_budget", "451 4.7.1 too much mail from you; try later")
        loop = asyncio.get_running_loop()
        try:
            # One copy, however many recipients: it is processed for the one
            # that carries a VERP token.
            bounce_id = await loop.run_in_executor(
                None, self.server.store, raw, list(envelope.rcpt_tos)
            )
        except OutboxError:
            log.exception("could not store a bounce")
            return "451 4.3.0 could not store the message, try again later"
        self.server.processor.submit(self.server.process, bounce_id)
        return f"250 2.0.0 stored as {bounce_id}"


def _peer(session: Any) -> str:
    peer = getattr(session, "peer", None)
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


class BounceServer:
    def __init__(self, settings: Settings, pool: connections.Pool) -> None:
        if not settings.bounce_domain:
            raise ConfigError("OUTBOX_BOUNCE_DOMAIN must be set to receive bounces")
        self.settings = settings
        self.pool = pool
        self.processor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bounces")
        self.parser = ParseWorker()  # used from the processor's one thread only
        self.budget = PeerBudget(settings.bounce_peer_bytes_per_hour)
        self.controller = _Controller(
            _Handler(self),
            hostname=settings.bounce_host,
            port=settings.bounce_port,
            data_size_limit=MAX_BOUNCE_BYTES,
            ready_timeout=10,
        )
        self.metrics: WSGIServer | None = None
        # The handler hands its work to threads: a loop that does not answer is stuck.
        self.pulse = liveness.LoopPulse(limit=30.0)

    def store(self, raw: bytes, recipients: list[str]) -> int:
        """One copy for the recipient that carries a VERP token (else the first):
        a real bounce has one recipient, a message to many is not worth many rows."""
        verp = [r for r in recipients if row_token_from_address(r)]
        if len(recipients) > 1:
            log.info("a message to %d bounce addresses is stored once", len(recipients))
        with self.pool.connection() as conn:  # committed on leaving
            return bounce_reports.store_bounce(conn, raw, (verp or recipients)[0])

    def process(self, bounce_id: int) -> None:
        try:
            with self.pool.connection() as conn:
                process_or_set_aside(conn, bounce_id, self.settings, self.parser.parse)
        except Exception:
            # The database is gone: it stays unprocessed and is picked up at the
            # next start or reprocess.
            log.exception("processing bounce #%d failed", bounce_id)

    def process_backlog(self) -> None:
        try:
            with self.pool.connection() as conn:
                left = process_pending(conn, self.settings, self.parser.parse)
        except Exception:
            log.exception("processing the bounces left from before failed")
            return
        if left:
            log.info("processed %d bounces left from before", left)

    def start(self) -> None:
        ensure_free(self.settings.bounce_host, self.settings.bounce_port, "OUTBOX_BOUNCE_PORT")
        if self.settings.bounce_metrics_port:
            ensure_free(
                self.settings.metrics_host,
                self.settings.bounce_metrics_port,
                "OUTBOX_BOUNCE_METRICS_PORT",
            )
            host, port = self.settings.metrics_host, self.settings.bounce_metrics_port
            self.metrics, _ = start_http_server(port, addr=host)
        self.controller.start()
        log.info(
            "receiving bounces for @%s on %s:%d",
            self.settings.bounce_domain,
            self.settings.bounce_host,
            self.settings.bounce_port,
        )
        # Listening first: a backlog of costly messages delays only itself.
        self.processor.submit(self.process_backlog)

    def not_listening(self) -> str | None:
        """Why the SMTP listener does not serve, or None (the bounce server's liveness)."""
        listener = self.controller.server
        if listener is None or not listener.is_serving():
            return "its SMTP listener is closed"
        self.pulse.loop = self.controller.loop
        return self.pulse.check()

    def stop(self) -> None:
        self.controller.stop()
        self.processor.shutdown(wait=True)
        self.parser.close()
        if self.metrics is not None:
            self.metrics.shutdown()
            self.metrics.server_close()


def serve(settings: Settings, stop: threading.Event) -> None:
    with connections.Pool(
        settings.database_url,
        name="outbox-bounces",
        max_size=4,
        prepare=settings.prepared_statements == "on",
    ) as pool:
        server = BounceServer(settings, pool)
        server.start()
        reporter = liveness.Reporter(
            settings, "bounces", server.not_listening, stale_after=liveness.STALE_AFTER
        ).start()
        try:
            stop.wait()
        finally:
            reporter.stop()
            server.stop()
