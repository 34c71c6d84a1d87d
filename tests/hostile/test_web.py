"""Finding 8 (the web endpoint), the webhook findings, and hostile requests:
`outbox web` on uvicorn against slow and many clients, with real Postgres."""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import dataclasses
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from psycopg_pool import ConnectionPool

from outbox.config import Settings
from outbox.message.list_unsubscribe import token as make_token
from outbox.web.server import WebServer, make_server
from tests.integration.helpers import add_newsletter, query
from tests.integration.test_webhooks import POSTMARK_AUTH, RESEND_SECRET, postmark_bounce
from tests.keys import SECRET


@dataclasses.dataclass
class Running:
    url: str
    port: int
    settings: Settings
    server: WebServer


@pytest.fixture
def web(settings: Settings) -> Iterator[Running]:
    settings = dataclasses.replace(
        settings,
        secret=SECRET,
        postmark_webhook_auth=POSTMARK_AUTH,
        resend_webhook_secret=RESEND_SECRET,
        web_timeout=2.0,
        web_concurrency=300,
    )
    with ConnectionPool(settings.database_url, min_size=1, max_size=8) as pool:
        server = make_server(settings, pool, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        port = server.server_address[1]
        try:
            yield Running(f"http://127.0.0.1:{port}", port, settings, server)
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=15)


def postmark_headers() -> dict[str, str]:
    token = base64.b64encode(POSTMARK_AUTH.encode()).decode()
    return {"Authorization": f"Basic {token}", "Content-Type": "application/json"}


@pytest.mark.slow
def test_regression_slow_clients_hold_no_thread_and_do_not_block_others(web: Running) -> None:
    """200 clients trickling a byte every 4 s held 206 threads; a GET still had to wait."""
    slow = []
    for _ in range(200):
        client = socket.create_connection(("127.0.0.1", web.port), timeout=10)
        client.sendall(b"G")
        slow.append(client)
    try:
        threads_before = threading.active_count()
        answer = httpx.get(f"{web.url}/healthz", timeout=10)
        assert (answer.status_code, answer.text) == (200, "ok\n")
        assert threading.active_count() <= threads_before + 2  # no thread per connection
        # A client that has not sent its whole request by the deadline is cut off.
        deadline = time.monotonic() + web.settings.web_timeout + 5
        closed = 0
        for client in slow:
            client.settimeout(max(deadline - time.monotonic(), 0.1))
            try:
                client.sendall(b"E")
                if client.recv(1) == b"":
                    closed += 1
            except OSError:
                closed += 1
        assert closed == len(slow)
    finally:
        for client in slow:
            client.close()


def _read_all(client: socket.socket) -> bytes:
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_headers_that_never_end_get_a_431_and_the_connection_closes(web: Running) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=10) as client:
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for n in range(40):  # 40 headers of 1 KB, in as many writes: past 16 KB
            try:
                client.sendall(b"X-Pad-%d: %s\r\n" % (n, b"p" * 1024))
            except OSError:
                break  # closed on us: what the answer below says
        answer = _read_all(client)
    assert answer.startswith(b"HTTP/1.1 431 ")


def test_headers_in_many_small_writes_within_the_limit_are_served(web: Running) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=10) as client:
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for n in range(10):  # 10 KB of headers, each its own write
            client.sendall(b"X-Pad-%d: %s\r\n" % (n, b"p" * 1000))
            time.sleep(0.01)
        client.sendall(b"Connection: close\r\n\r\n")
        answer = _read_all(client)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b"ok\n")


def test_a_body_still_arriving_after_its_answer_is_not_the_next_requests_headers(
    web: Running,
) -> None:
    body = b"x" * 600_000  # over the limit: answered 413 once the limit is read
    head = b"POST /webhooks/postmark HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
    with socket.create_connection(("127.0.0.1", web.port), timeout=10) as client:
        client.sendall(head % len(body))
        sent, first = 0, b""
        client.setblocking(False)
        while not first and sent < len(body):  # as a slow client sends it, until answered
            client.sendall(body[sent : sent + 8192])
            sent += 8192
            time.sleep(0.002)
            with contextlib.suppress(BlockingIOError):
                first = client.recv(65536)
        client.setblocking(True)
        assert first.startswith(b"HTTP/1.1 413 ")
        assert sent < len(body)  # answered while the body was still coming
        for start in range(sent, len(body), 8192):  # the rest, still arriving
            client.sendall(body[start : start + 8192])
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        rest = _read_all(client)
    assert rest.startswith(b"HTTP/1.1 200 "), rest[:80]  # the next request read as one
    assert rest.endswith(b"ok\n")


@pytest.mark.slow
def test_the_next_request_on_a_kept_connection_has_its_own_deadline(web: Running) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as client:
        client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = client.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        client.sendall(b"GET /hea")  # and never the rest
        # Closed by the server (a hung connection would raise the client's 30 s timeout).
        assert client.recv(1) == b""


def test_regression_many_concurrent_gets_are_answered_promptly(web: Running) -> None:
    """200 concurrent valid GETs had a p99 of 14-38 s (listen backlog 5, pool 4)."""
    row = add_newsletter(web.settings, 1)[0]
    link = f"{web.url}/unsubscribe?token={make_token(row, secret=SECRET)}"

    path = link.removeprefix(web.url)
    start = threading.Barrier(200)

    def fetch(_: int) -> tuple[int, float]:
        # http.client: a bare client, so the figure is the server's, not httpx's set-up.
        connection = http.client.HTTPConnection("127.0.0.1", web.port, timeout=30)
        start.wait()
        started = time.monotonic()
        try:
            connection.request("GET", path)
            status = connection.getresponse().status
        finally:
            connection.close()
        return status, time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        results = list(pool.map(fetch, range(200)))
    statuses = {status for status, _ in results}
    took = sorted(seconds for _, seconds in results)
    p99 = took[int(len(took) * 0.99) - 1]
    print(f"200 concurrent GETs: p50 {took[100] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    assert statuses == {200}
    assert (
        query(web.settings, "SELECT count(*) FROM email_suppression")[0][0] == 0
    )  # GET: no change


def test_pages_refuse_frames_and_referrers(web: Running) -> None:
    row = add_newsletter(web.settings, 1)[0]
    page = httpx.get(f"{web.url}/unsubscribe?token={make_token(row, secret=SECRET)}")
    assert page.status_code == 200
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "server" not in page.headers
    head = httpx.head(f"{web.url}/healthz")
    assert (head.status_code, head.content) == (200, b"")


def test_regression_deeply_nested_json_gets_an_answer(web: Running) -> None:
    """100k-deep JSON dropped the connection without a response."""
    body = b"[" * 100_000 + b"]" * 100_000
    answer = httpx.post(
        f"{web.url}/webhooks/postmark", content=body, headers=postmark_headers(), timeout=30
    )
    assert answer.status_code in (400, 413)
    assert query(web.settings, "SELECT count(*) FROM email_bounce")[0][0] == 0


def test_regression_postmark_event_without_id_is_stored_once(web: Running) -> None:
    """A Postmark event without `ID` was stored again on each replay."""
    event = postmark_bounce("provider-1", "gone@example.org")
    del event["ID"]
    body = json.dumps(event).encode()
    for _ in range(3):
        answer = httpx.post(
            f"{web.url}/webhooks/postmark", content=body, headers=postmark_headers()
        )
        assert answer.status_code == 200
    assert query(web.settings, "SELECT count(*) FROM email_bounce")[0][0] == 1


def test_regression_webhook_strings_with_nul_are_stored(web: Running) -> None:
    event = postmark_bounce("provider-2", "gone@example.org", Details="550 5.1.1 no\x00such \udcff")
    body = json.dumps(event).encode()  # JSON escapes: \u0000 and a lone surrogate
    answer = httpx.post(f"{web.url}/webhooks/postmark", content=body, headers=postmark_headers())
    assert answer.status_code == 200
    [(processed, error)] = query(
        web.settings, "SELECT processed_at IS NOT NULL, error FROM email_bounce"
    )
    assert processed
    assert error is None


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status"),
    [
        ("POST", "/webhooks/postmark", b"x" * (300 * 1024), {}, 413),
        ("PUT", "/healthz", b"", {}, 405),
        ("POST", "/webhooks/postmark", b"{}", {"Authorization": "Basic !!!"}, 401),
        ("POST", "/webhooks/nope", b"{}", {}, 404),
        ("GET", "/unsubscribe?token=1-" + "0" * 16, b"", {}, 400),
        ("GET", "/unsubscribe?token=%00%ff", b"", {}, 400),
        ("POST", "/unsubscribe?token=abc", b"List-Unsubscribe=One-Click", {}, 400),
    ],
)
def test_hostile_requests_get_a_clear_answer(
    web: Running, method: str, path: str, body: bytes, headers: dict[str, str], status: int
) -> None:
    answer = httpx.request(method, web.url + path, content=body, headers=headers, timeout=10)
    assert answer.status_code == status
    assert query(web.settings, "SELECT count(*) FROM email_suppression")[0][0] == 0


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /webhooks/postmark HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"NOT HTTP AT ALL\r\n\r\n",
        # A path that urlsplit reads as a host (and cannot parse).
        b"POST //[ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        b"POST //webhooks/postmark HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    ],
)
def test_malformed_http_gets_a_400_not_a_dropped_connection(
    web: Running, request_bytes: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", web.port), timeout=10) as client:
        client.sendall(request_bytes)
        answer = client.recv(200)
    assert answer.startswith(b"HTTP/1.1 4")


@hypothesis_settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60),
    body=st.binary(max_size=2000),
)
@pytest.mark.slow
def test_any_request_is_answered_and_suppresses_nobody(
    web: Running, path: str, body: bytes
) -> None:
    for target in (f"/unsubscribe?token={path}", f"/webhooks/postmark?{path}", f"/{path}"):
        answer = httpx.post(web.url + target, content=body, headers=postmark_headers(), timeout=10)
        assert answer.status_code < 500 or answer.status_code == 503
    assert query(web.settings, "SELECT count(*) FROM email_suppression")[0][0] == 0
