"""``outbox bounces serve``: an SMTP server that receives bounces and complaints.

It accepts mail only for the bounce domain (anything else: 550, never an open
relay), stores the raw message in Postgres and commits, and only then answers
250; processing runs afterwards from the stored copy.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiosmtpd.controller import Controller
from psycopg_pool import ConnectionPool

from outbox.config import Settings
from outbox.db import store
from outbox.errors import ConfigError, OutboxError
from outbox.feedback.ingest import process_or_set_aside, process_pending

log = logging.getLogger(__name__)
# aiosmtpd logs every command at INFO ("sender: …") and every DATA line at
# DEBUG: addresses and report contents in clear. Its warnings still show.
logging.getLogger("mail.log").setLevel(logging.WARNING)
MAX_BOUNCE_BYTES = 10 * 2**20  # a bounce may quote the whole original; past this it is not one


class _Handler:
    def __init__(self, server: BounceServer) -> None:
        self.server = server

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        domain = address.rpartition("@")[2].lower()
        if domain != self.server.settings.bounce_domain.lower():
            return "550 5.7.1 relaying denied: this server only takes bounces"
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw: bytes = envelope.original_content or envelope.content
        loop = asyncio.get_running_loop()
        try:
            ids = [
                await loop.run_in_executor(None, self.server.store, raw, to)
                for to in envelope.rcpt_tos
            ]
        except OutboxError:
            log.exception("could not store a bounce")
            return "451 4.3.0 could not store the message, try again later"
        for bounce_id in ids:
            self.server.processor.submit(self.server.process, bounce_id)
        return f"250 2.0.0 stored as {','.join(map(str, ids))}"


class BounceServer:
    def __init__(self, settings: Settings, pool: ConnectionPool) -> None:
        if not settings.bounce_domain:
            raise ConfigError("OUTBOX_BOUNCE_DOMAIN must be set to receive bounces")
        self.settings = settings
        self.pool = pool
        self.processor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bounces")
        self.controller = Controller(
            _Handler(self),
            hostname=settings.bounce_host,
            port=settings.bounce_port,
            data_size_limit=MAX_BOUNCE_BYTES,
            ready_timeout=10,
        )

    def store(self, raw: bytes, envelope_to: str) -> int:
        with self.pool.connection() as conn:
            return store.store_bounce(conn, raw, envelope_to)  # committed on leaving

    def process(self, bounce_id: int) -> None:
        try:
            with self.pool.connection() as conn:
                process_or_set_aside(conn, bounce_id, self.settings)
        except Exception:
            # The database is gone: it stays unprocessed and is picked up at the
            # next start or reprocess.
            log.exception("processing bounce #%d failed", bounce_id)

    def start(self) -> None:
        with self.pool.connection() as conn:
            left = process_pending(conn, self.settings)
        if left:
            log.info("processed %d bounces left from before", left)
        self.controller.start()
        log.info(
            "receiving bounces for @%s on %s:%d",
            self.settings.bounce_domain,
            self.settings.bounce_host,
            self.settings.bounce_port,
        )

    def stop(self) -> None:
        self.controller.stop()
        self.processor.shutdown(wait=True)


def serve(settings: Settings, stop: threading.Event) -> None:
    with ConnectionPool(
        settings.database_url, min_size=1, max_size=4, check=ConnectionPool.check_connection
    ) as pool:
        server = BounceServer(settings, pool)
        server.start()
        try:
            stop.wait()
        finally:
            server.stop()
