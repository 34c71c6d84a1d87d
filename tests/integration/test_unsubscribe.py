"""Bulk mail carries one-click unsubscribe; the endpoint suppresses newsletters only."""

from __future__ import annotations

import dataclasses
import email
import email.policy
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import EmailMessage

import dkim as dkimpy
import psycopg
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from outbox import enqueue
from outbox.config import Settings
from outbox.db.store import suppressions
from outbox.message.dkim import Signer, public_record
from outbox.message.list_unsubscribe import token as make_token
from outbox.web.server import make_server
from tests.integration.helpers import LOGIN, NEWS, add_newsletter, pool, query
from tests.integration.test_delivery import harness
from tests.keys import SECRET

# Requests go straight to loopback, whatever proxy the environment names.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def request(url: str, body: bytes | None = None) -> tuple[int, str]:
    try:
        with OPENER.open(urllib.request.Request(url, data=body), timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def web(settings: Settings) -> Iterator[Settings]:
    """The endpoint on a free loopback port, and settings whose links point at it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pool(settings) as p:
        server = make_server(dataclasses.replace(settings, secret=SECRET), p, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield dataclasses.replace(
                settings,
                secret=SECRET,
                unsubscribe_url=f"http://127.0.0.1:{server.server_address[1]}/unsubscribe",
                dkim_selector="s2026",
                dkim_domain="outbox.localhost",
                dkim_private_key=pem.decode(),
            )
        finally:
            server.shutdown()
            server.server_close()


def parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def https_link(message: EmailMessage) -> str:
    match = re.search(r"<(http[^>]+)>", str(message["List-Unsubscribe"]))
    assert match, message["List-Unsubscribe"]
    return match.group(1)


def test_one_click_unsubscribe_stops_newsletters_not_login_codes(web: Settings) -> None:
    settings = web
    add_newsletter(settings, 2)
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn,
            idempotency_key="login-1",
            to="r0@example.com",
            template="login_code",
            params=LOGIN,
            settings=settings,
        )
        conn.commit()
    with harness(settings) as (h, sink):
        h.run()
    to_r0 = [m.data for m in sink.messages if m.recipients == ["r0@example.com"]]
    (newsletter_data,) = [d for d in to_r0 if b"Auto-Submitted" not in d]
    (login_data,) = [d for d in to_r0 if b"Auto-Submitted" in d]
    newsletter, login = parse(newsletter_data), parse(login_data)

    # RFC 8058: both headers on bulk mail, covered by the DKIM signature; none on a login code.
    assert newsletter["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    link = https_link(newsletter)
    assert "r0" not in link  # the token names the row, not the address
    assert login["List-Unsubscribe"] is None
    assert login["List-Unsubscribe-Post"] is None
    signer = Signer.from_settings(settings)
    assert signer is not None
    record = public_record(signer).encode()
    for received in sink.messages:
        assert dkimpy.verify(received.data, dnsfunc=lambda name, timeout=5: record)
    signed = " ".join(str(newsletter["DKIM-Signature"]).split())
    assert "list-unsubscribe : list-unsubscribe : list-unsubscribe-post" in signed
    # The newsletter shows the same link in its body.
    html = newsletter.get_body(("html",))
    assert html is not None
    assert link.replace("&", "&amp;") in html.get_content()

    # A GET (a link scanner, a preview) only shows the confirmation page.
    status, page = request(link)
    assert status == 200
    assert '<form method="post"' in page
    assert "r…@example.com" in page
    with psycopg.connect(settings.database_url) as conn:
        assert suppressions.find_suppression(conn, "r0@example.com") is None

    # The one-click POST suppresses newsletters; a repeat answers the same.
    first = request(link, b"List-Unsubscribe=One-Click")
    assert first[0] == 200
    assert request(link, b"List-Unsubscribe=One-Click") == first
    with psycopg.connect(settings.database_url) as conn:
        found = suppressions.find_suppression(conn, "r0@example.com")
        assert found is not None
        assert (found.scope, found.reason) == ("bulk", "unsubscribe")
        assert suppressions.find_suppression(conn, "r1@example.com") is None
        newsletter_again = enqueue(
            conn,
            idempotency_key="nl-again",
            to="r0@example.com",
            template="newsletter",
            params=NEWS,
            settings=settings,
        )
        code_again = enqueue(
            conn,
            idempotency_key="login-2",
            to="r0@example.com",
            template="login_code",
            params=LOGIN,
            settings=settings,
        )
        conn.commit()
    assert newsletter_again.suppressed
    assert not code_again.suppressed
    # The application is told once: the repeated POST changed nothing.
    told = query(
        settings,
        "SELECT o.idempotency_key, e.type FROM outbox_event e JOIN email_outbox o"
        " ON o.id = e.outbox_id WHERE e.type IN ('email.unsubscribed', 'email.suppressed')"
        " ORDER BY e.id",
    )
    assert told == [("nl-0", "email.unsubscribed"), ("nl-again", "email.suppressed")]


def test_bad_requests(web: Settings) -> None:
    settings = web
    (row,) = add_newsletter(settings, 1)
    link = f"{settings.unsubscribe_url}?token="
    token = f"{row}-0123456789abcdef"
    assert request(link + token, b"List-Unsubscribe=One-Click")[0] == 400  # forged
    assert request(link, b"List-Unsubscribe=One-Click")[0] == 400  # none
    good = link + make_token(row, secret=SECRET)
    assert request(good, b"something=else")[0] == 400  # not the one-click body
    missing = link + make_token(row + 1000, secret=SECRET)
    assert request(missing, b"List-Unsubscribe=One-Click")[0] == 404
    multipart = (
        b"--b\r\nContent-Disposition: form-data; "
        b'name="List-Unsubscribe"\r\n\r\nOne-Click\r\n--b--\r\n'
    )
    assert request(good, multipart)[0] == 200
    base = settings.unsubscribe_url.rsplit("/", 1)[0]
    assert request(f"{base}/healthz") == (200, "ok\n")


def test_outbox_web_serves_on_port(settings: Settings) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**dataclasses.replace(settings, secret=SECRET).to_env(), "PORT": str(port)}
    child = subprocess.Popen(
        [sys.executable, "-m", "outbox.cli", "web", "--host", "127.0.0.1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert request(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise
                time.sleep(0.1)
    finally:
        child.send_signal(signal.SIGTERM)
        _, stderr = child.communicate(timeout=20)
    assert child.returncode == 0, stderr
