"""`outbox web`: the one-click unsubscribe endpoint (RFC 8058) and the providers'
bounce webhooks (:mod:`outbox.feedback.webhooks`), a small threaded HTTP server.

``POST <link>`` with the body ``List-Unsubscribe=One-Click`` (what a mailbox
provider sends, or the confirmation page's button) verifies the token, looks
up the row's recipient and adds it to the suppression list with scope
``bulk``: newsletters stop, login codes and password resets still arrive. A
repeated POST answers the same 200. ``GET <link>`` only shows a confirmation
page, because link scanners and previews fetch every link in a message.
``GET /healthz`` answers ``ok`` for the platform.
"""

from __future__ import annotations

import html
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from outbox.bounces.providers import PROVIDERS
from outbox.config import Settings
from outbox.db import store
from outbox.db.sql import queries
from outbox.errors import ConfigError, StoreError
from outbox.feedback.webhooks import PREFIX as WEBHOOKS
from outbox.feedback.webhooks import ProviderWebhooks
from outbox.message import list_unsubscribe as unsubscribe

log = logging.getLogger(__name__)

MAX_BODY = 256 * 1024  # a Postmark bounce event may quote the whole message
_TEXT = "text/plain; charset=utf-8"
_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title></head>
<body style="font-family: Helvetica, Arial, sans-serif; max-width: 32rem; margin: 3rem auto;
 padding: 0 1rem; color: #1f2937; line-height: 1.5">
<h1 style="font-size: 1.5rem">{title}</h1>
{body}
</body></html>
"""


@dataclass(frozen=True, slots=True)
class Response:
    status: HTTPStatus
    body: str
    content_type: str = "text/html; charset=utf-8"


class Unsubscribes:
    """What the endpoint does, apart from HTTP parsing (tested directly)."""

    def __init__(self, settings: Settings, pool: ConnectionPool) -> None:
        if not settings.secret:
            raise ConfigError("the unsubscribe endpoint needs OUTBOX_SECRET to verify tokens")
        self.secret = settings.secret
        self.previous = settings.previous_secret_list  # tokens signed before a rotation
        self.pool = pool

    def handle(self, method: str, target: str, body: bytes = b"") -> Response:
        parts = urlsplit(target)
        if parts.path == "/healthz":
            return Response(HTTPStatus.OK, "ok\n", "text/plain; charset=utf-8")
        token = parse_qs(parts.query).get("token", [""])[0]
        outbox_id = unsubscribe.outbox_id_from_token(
            token, secret=self.secret, previous=self.previous
        )
        if outbox_id is None:
            return _page(
                HTTPStatus.BAD_REQUEST, "Link not valid", "This unsubscribe link is not valid."
            )
        if method == "POST" and not _is_one_click(body):
            return _page(HTTPStatus.BAD_REQUEST, "Not understood", "Use the button to unsubscribe.")
        try:
            address = self._recipient(outbox_id, suppress=method == "POST")
        except (psycopg.Error, PoolTimeout, StoreError):
            log.exception("unsubscribe for email %s failed", outbox_id)
            return _page(HTTPStatus.SERVICE_UNAVAILABLE, "Try again", "Please try again later.")
        if address is None:
            return _page(HTTPStatus.NOT_FOUND, "Link expired", "This link has expired.")
        shown = html.escape(_masked(address))
        if method == "POST":
            log.info("unsubscribed the recipient of email %s from bulk mail", outbox_id)
            return _page(
                HTTPStatus.OK,
                "You are unsubscribed",
                f"<p>{shown} will get no more newsletters from us. Messages you ask for, "
                "such as login codes and password resets, still arrive.</p>",
            )
        action = html.escape(target, quote=True)
        return _page(
            HTTPStatus.OK,
            "Unsubscribe?",
            f"<p>Stop newsletters to {shown}?</p>"
            f'<form method="post" action="{action}">'
            '<input type="hidden" name="List-Unsubscribe" value="One-Click">'
            '<button type="submit" style="font-size: 1rem; padding: .5rem 1rem">'
            "Unsubscribe</button>"
            "</form>",
        )

    def _recipient(self, outbox_id: int, *, suppress: bool) -> str | None:
        with self.pool.connection() as conn:  # commits on leaving
            found = conn.execute(queries["unsubscribe_recipient"], {"id": outbox_id}).fetchone()
            if found is None:
                return None
            address = str(found[0])
            if suppress:
                # Idempotent: an address already suppressed stays so, with the same answer.
                store.suppress(conn, address, reason="unsubscribe", scope="bulk")
        return address


class App:
    """Routes a request to the webhooks or to the unsubscribe links."""

    def __init__(self, settings: Settings, pool: ConnectionPool) -> None:
        self.webhooks = ProviderWebhooks(settings, pool)
        self.unsubscribes = Unsubscribes(settings, pool) if settings.secret else None
        if self.unsubscribes is None and not any(map(self.webhooks.configured, PROVIDERS)):
            raise ConfigError(
                "outbox web needs OUTBOX_SECRET (unsubscribe links) or a provider webhook "
                "(OUTBOX_POSTMARK_WEBHOOK_AUTH, OUTBOX_RESEND_WEBHOOK_SECRET)"
            )

    def handle(
        self, method: str, target: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> Response:
        path = urlsplit(target).path
        if path == "/healthz":
            return Response(HTTPStatus.OK, "ok\n", _TEXT)
        if path.startswith(WEBHOOKS):
            if method != "POST":
                return Response(HTTPStatus.METHOD_NOT_ALLOWED, "POST only\n", _TEXT)
            provider = path.removeprefix(WEBHOOKS).strip("/")
            status, text = self.webhooks.handle(provider, headers or {}, body)
            return Response(status, text, _TEXT)
        if self.unsubscribes is None:
            return Response(HTTPStatus.NOT_FOUND, "not found\n", _TEXT)
        return self.unsubscribes.handle(method, target, body)


def make_server(
    settings: Settings, pool: ConnectionPool, host: str, port: int
) -> ThreadingHTTPServer:
    app = App(settings, pool)

    class Handler(BaseHTTPRequestHandler):
        server_version = "outbox"
        sys_version = ""
        timeout = 10  # seconds per request line and body: a slow client cannot hold a thread

        def do_GET(self) -> None:
            self._answer(app.handle("GET", self.path))

        def do_HEAD(self) -> None:
            self._answer(app.handle("GET", self.path), head=True)

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self._answer(Response(HTTPStatus.BAD_REQUEST, "bad or too large body\n"))
                return
            body = self.rfile.read(length)
            self._answer(app.handle("POST", self.path, body, dict(self.headers.items())))

        def _answer(self, response: Response, *, head: bool = False) -> None:
            data = response.body.encode("utf-8")
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Referrer-Policy", "no-referrer")  # the token stays here
            self.end_headers()
            if not head:
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            # The default logs the request line, and with it the token.
            log.debug("%s %s", self.command, args[1] if len(args) > 1 else "")

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve(settings: Settings, host: str, port: int, stop: threading.Event) -> None:
    """Serve until ``stop`` is set."""
    with ConnectionPool(
        settings.database_url, min_size=1, max_size=4, name="outbox-web", open=True
    ) as pool:
        server = make_server(settings, pool, host, port)
        thread = threading.Thread(target=server.serve_forever, name="outbox-web", daemon=True)
        thread.start()
        log.info("outbox web listening on %s:%d", host, server.server_address[1])
        stop.wait()
        server.shutdown()
        server.server_close()


def _is_one_click(body: bytes) -> bool:
    """RFC 8058 section 3.2: ``List-Unsubscribe=One-Click``, URL- or multipart-encoded."""
    if b"List-Unsubscribe=One-Click" in body:
        return True
    return b'name="List-Unsubscribe"' in body and b"One-Click" in body


def _masked(address: str) -> str:
    local, _, domain = address.rpartition("@")
    return f"{local[:1]}…@{domain}"


def _page(status: HTTPStatus, title: str, body: str) -> Response:
    if not body.startswith("<"):
        body = f"<p>{html.escape(body)}</p>"
    return Response(status, _PAGE.format(title=html.escape(title), body=body))
