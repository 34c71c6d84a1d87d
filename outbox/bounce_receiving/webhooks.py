"""``POST /webhooks/postmark`` and ``/webhooks/resend``: a provider's bounces in.

An email API keeps the SMTP conversation and the bounces to itself and reports
them by webhook instead of by mail to the VERP address, so without this a
hard-bouncing address sent through Postmark or Resend would never be
suppressed. Each call is authenticated, parsed, stored and committed before it
is answered 200, then processed like a bounce that came by mail: a crash after
storing loses nothing (`outbox bounces reprocess`), and a failure before it
answers 503 so the provider retries. A retried event is stored once.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus

from outbox.bounce_parsing import providers
from outbox.bounce_receiving.ingest import process_or_set_aside
from outbox.bounce_receiving.webhook_auth import basic_auth_matches, svix_signature_valid
from outbox.config import Settings
from outbox.db.store import bounce_reports, connections
from outbox.errors import StoreError, WebhookError

log = logging.getLogger(__name__)

PREFIX = "/webhooks/"
Answer = tuple[HTTPStatus, str]


class ProviderWebhooks:
    """What the endpoint does, apart from HTTP parsing (tested directly)."""

    def __init__(
        self, settings: Settings, pool: connections.Pool, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.pool = pool
        self.clock = clock

    def configured(self, provider: str) -> bool:
        return bool(self._credential(provider))

    def handle(self, provider: str, headers: Mapping[str, str], body: bytes) -> Answer:
        if provider not in providers.PROVIDERS or not self.configured(provider):
            return HTTPStatus.NOT_FOUND, "no such webhook\n"
        if not self._authentic(provider, headers, body):
            log.warning("refused a %s webhook call that failed authentication", provider)
            return HTTPStatus.UNAUTHORIZED, "not authenticated\n"
        try:
            report = providers.parse(provider, body, _header(headers, "svix-id"))
        except WebhookError as exc:
            return HTTPStatus.BAD_REQUEST, f"{exc}\n"
        except (RecursionError, ValueError, TypeError, KeyError, AttributeError) as exc:
            # Authenticated, but no report the parser can read (JSON nested 100,000
            # deep, say): an answer, never a dropped connection.
            log.warning("a %s webhook call could not be parsed (%s)", provider, type(exc).__name__)
            return HTTPStatus.BAD_REQUEST, "not a report this endpoint can read\n"
        if not report.results:
            return HTTPStatus.OK, "not a bounce or complaint: ignored\n"
        try:
            return self._store_and_process(report, body)
        except StoreError:
            log.exception("a %s webhook call was not stored; the provider retries", provider)
            return HTTPStatus.SERVICE_UNAVAILABLE, "try again\n"

    def _store_and_process(self, report: providers.ProviderReport, body: bytes) -> Answer:
        with self.pool.connection() as conn:
            # An event without its id is known by its bytes: a replay is stored once.
            event_id = report.event_id or "sha256:" + hashlib.sha256(body).hexdigest()
            bounce_id = bounce_reports.store_report(
                conn, body, source=report.provider, event_id=event_id
            )
            connections.commit(conn)  # kept before anything acts on it
            if bounce_id is None:
                return HTTPStatus.OK, "already received\n"
            try:
                processed = process_or_set_aside(conn, bounce_id, self.settings)
            except StoreError:
                # Stored and answered: `outbox bounces reprocess` finishes it.
                log.exception("%s report #%d stored, not processed", report.provider, bounce_id)
                return HTTPStatus.OK, "stored\n"
        if processed is not None and processed.link.outbox_id is None:
            log.warning("%s report #%d names no email sent from here", report.provider, bounce_id)
        return HTTPStatus.OK, "processed\n"

    def _credential(self, provider: str) -> str:
        if provider == "postmark":
            return self.settings.postmark_webhook_auth
        if provider == "resend":
            return self.settings.resend_webhook_secret
        return ""

    def _authentic(self, provider: str, headers: Mapping[str, str], body: bytes) -> bool:
        credential = self._credential(provider)
        if provider == "postmark":
            return basic_auth_matches(_header(headers, "authorization"), credential)
        return svix_signature_valid(
            credential,
            msg_id=_header(headers, "svix-id"),
            timestamp=_header(headers, "svix-timestamp"),
            signatures=_header(headers, "svix-signature"),
            body=body,
            now=self.clock(),
        )


def _header(headers: Mapping[str, str], name: str) -> str | None:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return None
