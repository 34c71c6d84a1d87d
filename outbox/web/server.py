"""`outbox web`: the HTTP API (:mod:`outbox.web.emails_api`, under ``/v1/``), the
one-click unsubscribe endpoint (RFC 8058) and the providers' bounce webhooks
(:mod:`outbox.bounce_receiving.webhooks`), on uvicorn and Starlette: an
event loop holds every connection (a slow client holds no thread), a deadline
closes a request that trickles in, and past ``OUTBOX_WEB_CONCURRENCY``
requests at once the answer is an immediate 503.

``POST <link>`` with the body ``List-Unsubscribe=One-Click`` (what a mailbox
provider sends, or the confirmation page's button) verifies the token, looks
up the row's recipient and adds it to the suppression list with scope
``bulk``: newsletters stop, login codes and password resets still arrive. A
repeated POST answers the same 200. ``GET <link>`` only shows a confirmation
page, because link scanners and previews fetch every link in a message.
``GET /healthz`` answers ``ok`` for the platform. ``/console`` is the
operator console (:mod:`outbox.web.console`), served only when configured.
"""

from __future__ import annotations

import asyncio
import html
import importlib.util
import logging
import socket
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from urllib.parse import parse_qs

import uvicorn
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import CollectorRegistry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response as StarletteResponse
from starlette.routing import Route

from outbox.bounce_receiving.webhook_auth import scrape_authorized
from outbox.bounce_receiving.webhooks import PREFIX as WEBHOOKS
from outbox.bounce_receiving.webhooks import ProviderWebhooks
from outbox.config import Settings
from outbox.db.store import connections, event_rows, lookups, suppressions
from outbox.errors import ConfigError, StoreError
from outbox.message import list_unsubscribe as unsubscribe
from outbox.telemetry import liveness
from outbox.web.client_address import client_address
from outbox.web.connection_limits import RequestLimit, connection_ceiling
from outbox.web.console import PREFIX as CONSOLE
from outbox.web.console import Console
from outbox.web.console_auth import parse_networks
from outbox.web.console_routes import ConsoleApp
from outbox.web.email_request import PROBLEM
from outbox.web.emails_api import PREFIX as API
from outbox.web.emails_api import ApiResponse, EmailsApi
from outbox.web.http_common import (
    MAX_BODY,
    TEXT,
    TOO_LARGE,
    Response,
    bounded_body,
    starlette_response,
)
from outbox.web.http_protocol import protocol_for
from outbox.web.rate_limit import RateLimiter, retry_after

log = logging.getLogger(__name__)

# uvloop's event loop where it is installed (Linux and macOS): its transports
# cost a request a fraction of asyncio's own; asyncio's elsewhere.
_LOOP = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"

# Failed authentications at the HTTP API a client address may make at once,
# and how fast it may make more (one a minute): a misconfigured client sees 429s
# with Retry-After; a guesser gets twenty lookups, then one a minute.
FAILED_AUTH_BURST = 20
FAILED_AUTH_PER_SECOND = 1 / 60
MAX_BATCH_BODY = 8 * 2**20  # POST /v1/emails/batch: up to 1,000 emails with their params
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


class Unsubscribes:
    """What the endpoint does, apart from HTTP parsing (tested directly)."""

    def __init__(self, settings: Settings, pool: connections.Pool) -> None:
        if not settings.secret:
            raise ConfigError("the unsubscribe endpoint needs OUTBOX_SECRET to verify tokens")
        self.secret = settings.secret
        self.previous = settings.previous_secret_list  # tokens signed before a rotation
        self.pool = pool

    def handle(self, method: str, target: str, body: bytes = b"") -> Response:
        path, query = split_target(target)
        if path == "/healthz":
            return Response(HTTPStatus.OK, "ok\n", "text/plain; charset=utf-8")
        token = parse_qs(query).get("token", [""])[0]
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
        except StoreError:
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
            address = lookups.unsubscribe_recipient(conn, outbox_id)
            if address is None:
                return None
            # Idempotent: an address already suppressed stays so, with the same answer.
            if suppress and suppressions.suppress(
                conn, address, reason="unsubscribe", scope="bulk"
            ):
                event_rows.record_event(
                    conn, outbox_id, type_="email.unsubscribed", reason="unsubscribe by link"
                )
        return address


class App:
    """Routes a request to the HTTP API, the webhooks or the unsubscribe links."""

    def __init__(
        self, settings: Settings, pool: connections.Pool, metrics: CollectorRegistry | None = None
    ) -> None:
        self.api = EmailsApi(settings, pool)  # always on: it takes no request without a key
        self.webhooks = ProviderWebhooks(settings, pool)
        self.unsubscribes = Unsubscribes(settings, pool) if settings.secret else None
        # /metrics on this port, for hosts that route one port per app: only
        # with OUTBOX_METRICS_AUTH, which every scrape must carry.
        self.metrics = metrics if settings.metrics_auth else None
        self.metrics_auth = settings.metrics_auth
        # Requests to /v1/ that fail authentication, per client address: past
        # the burst, keys are not looked up until the bucket refills.
        self.failed_auth = RateLimiter(FAILED_AUTH_PER_SECOND, FAILED_AUTH_BURST)
        self.proxies = parse_networks(settings.console_trusted_proxies)

    def handle(
        self, method: str, target: str, body: bytes = b"", headers: Mapping[str, str] | None = None
    ) -> Response:
        path, _ = split_target(target)
        if path == "/healthz":
            return Response(HTTPStatus.OK, "ok\n", TEXT)
        if path == "/metrics":
            if self.metrics is None:  # served only with OUTBOX_METRICS_AUTH
                return Response(HTTPStatus.NOT_FOUND, "not found\n", TEXT)
            return self._metrics(headers or {})
        if path.startswith(WEBHOOKS):
            if method != "POST":
                return Response(HTTPStatus.METHOD_NOT_ALLOWED, "POST only\n", TEXT)
            provider = path.removeprefix(WEBHOOKS).strip("/")
            status, text = self.webhooks.handle(provider, headers or {}, body)
            return Response(status, text, TEXT)
        if self.unsubscribes is None:
            return Response(HTTPStatus.NOT_FOUND, "not found\n", TEXT)
        return self.unsubscribes.handle(method, target, body)

    def _metrics(self, headers: Mapping[str, str]) -> Response:
        given = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        if not scrape_authorized(given, self.metrics_auth):
            scheme = "Basic" if ":" in self.metrics_auth else "Bearer"
            return Response(
                HTTPStatus.UNAUTHORIZED,
                "a scrape needs OUTBOX_METRICS_AUTH's credentials\n",
                TEXT,
                (("WWW-Authenticate", f'{scheme} realm="outbox metrics"'),),
            )
        assert self.metrics is not None
        # The text format every Prometheus 2 reads (`outbox metrics` negotiates it too).
        return Response(
            HTTPStatus.OK, generate_latest(self.metrics).decode("utf-8"), CONTENT_TYPE_PLAIN_0_0_4
        )


def asgi_app(app: App, console: Console | None = None) -> Starlette:
    """``app`` behind Starlette: each request's database work runs in a worker
    thread of a bounded pool (anyio's, 40 threads), never on the event loop."""

    async def endpoint(request: Request) -> StarletteResponse:
        if request.url.path.startswith(API):
            return await api_endpoint(request)
        method = "GET" if request.method == "HEAD" else request.method
        target = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        if request.url.query:
            target += "?" + request.url.query
        body = b""
        if method == "POST":
            read = await bounded_body(request)
            if read is None:
                return starlette_response(TOO_LARGE, head=False)
            body = read
        if method not in ("GET", "POST"):
            answer = Response(HTTPStatus.METHOD_NOT_ALLOWED, "GET or POST\n", TEXT)
        else:
            answer = await run_in_threadpool(
                app.handle, method, target, body, dict(request.headers.items())
            )
        return starlette_response(answer, head=request.method == "HEAD")

    async def api_endpoint(request: Request) -> StarletteResponse:
        limit = MAX_BATCH_BODY if request.url.path == "/v1/emails/batch" else MAX_BODY
        client = client_address(
            request.client.host if request.client else None,
            request.headers.get("x-forwarded-for"),
            app.proxies,
        )
        # A client past its failed authentications gets no lookup of its key.
        guessing = app.failed_auth.wait(client, time.monotonic())
        body = await bounded_body(request, limit)
        if body is None:
            answer = ApiResponse(
                413,
                b'{"type":"about:blank","title":"Content Too Large",'
                b'"status":413,"detail":"the body is too large"}',
                PROBLEM,
            )
        elif guessing > 0:
            answer = ApiResponse(
                429,
                b'{"type":"about:blank","title":"Too Many Requests","status":429,'
                b'"detail":"too many failed authentications from this address"}',
                PROBLEM,
                {"Retry-After": retry_after(guessing)},
            )
        else:
            answer = await run_in_threadpool(
                app.api.handle,
                request.method,
                request.url.path,
                request.url.query,
                request.headers,
                body,
            )
            if answer.status == HTTPStatus.UNAUTHORIZED:
                app.failed_auth.take(client, time.monotonic())
        headers = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
        headers.update(answer.headers)
        return StarletteResponse(
            answer.body, status_code=answer.status, headers=headers, media_type=answer.content_type
        )

    methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
    routes = [Route("/{path:path}", endpoint, methods=methods)]
    if console is not None:
        # Other methods fall through to the last route, which answers them 405.
        console_app = ConsoleApp(console)
        routes[:0] = [
            Route(CONSOLE, console_app, methods=["GET", "HEAD", "POST"]),
            Route(CONSOLE + "/{path:path}", console_app, methods=["GET", "HEAD", "POST"]),
        ]
    return Starlette(routes=routes)


class _Server(uvicorn.Server):
    """uvicorn's server, which lets :attr:`pulse` reach the event loop it runs on."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        # A request's blocking work runs in threads: a loop that does not answer is stuck.
        self.pulse = liveness.LoopPulse(limit=30.0)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self.pulse.loop = asyncio.get_running_loop()
        await super().serve(sockets=sockets)


class WebServer:
    """``outbox web`` on uvicorn: the socket is bound at once (port 0 works),
    served by :meth:`serve_forever` until :meth:`shutdown`."""

    def __init__(
        self,
        settings: Settings,
        pool: connections.Pool,
        host: str,
        port: int,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        self.app = App(settings, pool, metrics)
        self.console = Console(settings, pool) if settings.console_enabled else None
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        # Listening from here on: a client that connects before the loop runs waits
        # in the backlog instead of being refused.
        self.socket.listen(settings.web_backlog)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        protocol = protocol_for(
            request_timeout=settings.web_timeout,
            per_peer=settings.web_peer_connections,
            total=connection_ceiling(settings.web_connections),
        )
        config = uvicorn.Config(
            # Past OUTBOX_WEB_CONCURRENCY requests being served, new ones get a 503
            # at once instead of waiting in a queue; connections waiting for a
            # request are bounded apart, by the protocol's book.
            RequestLimit(asgi_app(self.app, self.console), settings.web_concurrency),
            http=protocol,
            loop=_LOOP,
            lifespan="off",
            # The client is the TCP peer. uvicorn would otherwise take it from
            # X-Forwarded-For for any loopback peer, and anyone on this host could
            # claim to be a trusted proxy (OUTBOX_CONSOLE_TRUSTED_PROXIES).
            proxy_headers=False,
            backlog=settings.web_backlog,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=10,
            server_header=False,
            access_log=False,  # the request line carries the unsubscribe token
            log_config=None,
        )
        self.server = _Server(config)
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        self.server.should_exit = True
        self._stopped.wait(timeout=15)
        self.app.api.close()  # after the last request: its commit is answered

    def server_close(self) -> None:
        self.socket.close()


def make_server(
    settings: Settings,
    pool: connections.Pool,
    host: str,
    port: int,
    metrics: CollectorRegistry | None = None,
) -> WebServer:
    return WebServer(settings, pool, host, port, metrics)


def serve(
    settings: Settings,
    host: str,
    port: int,
    stop: threading.Event,
    metrics: CollectorRegistry | None = None,
) -> None:
    """Serve until ``stop`` is set; ``metrics`` at /metrics with OUTBOX_METRICS_AUTH."""
    with connections.Pool(
        settings.database_url,
        name="outbox-web",
        # A request holds a connection until its commit: with commits of a few
        # milliseconds, this bounds the HTTP API's emails per second.
        max_size=settings.web_pool_size,
        prepare=settings.prepared_statements == "on",
    ) as pool:
        server = make_server(settings, pool, host, port, metrics)
        thread = threading.Thread(target=server.serve_forever, name="outbox-web", daemon=True)
        thread.start()
        log.info("outbox web listening on %s:%d", host, server.server_address[1])

        def alive() -> str | None:
            return liveness.thread_alive(thread, "its server") or server.server.pulse.check()

        reporter = liveness.Reporter(
            settings, "web", alive, stale_after=liveness.STALE_AFTER
        ).start()
        try:
            stop.wait()
        finally:
            reporter.stop()
            server.shutdown()
            server.server_close()


def split_target(target: str) -> tuple[str, str]:
    """The path and query of a request target in origin form (RFC 9112, 3.2.1).

    Not urlsplit: it reads a target starting with ``//`` as a host name (and
    raises on ``//[``), where the request line holds only a path.
    """
    path, _, query = target.partition("?")
    return path, query.partition("#")[0]


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
