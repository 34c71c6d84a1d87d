"""Provider webhooks end to end: sent through a provider's local fake, reported
back to `outbox web` over HTTP, the address suppressed in Postgres."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from outbox import enqueue
from outbox.bounce_receiving.ingest import process_pending
from outbox.config import Settings
from outbox.db.store import bounce_reports, suppressions
from outbox.transports.select import build_transport
from outbox.web.server import make_server
from tests.integration.helpers import LOGIN, add_login, pool, query
from tests.integration.providers.postmark import FakePostmark
from tests.integration.providers.resend import FakeResend
from tests.integration.test_providers import provider_harness, provider_settings

POSTMARK_AUTH = "postmark-hook:correct horse"
RESEND_SECRET = "whsec_" + base64.b64encode(b"resend webhook signing key 32 by").decode()
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclasses.dataclass
class Web:
    url: str
    settings: Settings

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        request = urllib.request.Request(self.url + path, data=body, headers=headers)
        try:
            with OPENER.open(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def postmark(self, event: dict[str, Any], auth: str = POSTMARK_AUTH) -> tuple[int, str]:
        token = base64.b64encode(auth.encode()).decode()
        headers = {"Authorization": f"Basic {token}", "Content-Type": "application/json"}
        return self.post("/webhooks/postmark", json.dumps(event).encode(), headers)

    def resend(
        self, event: dict[str, Any], *, msg_id: str, sent_at: float | None = None
    ) -> tuple[int, str]:
        body = json.dumps(event).encode()
        return self.post("/webhooks/resend", body, svix_headers(body, msg_id, sent_at))


def svix_headers(body: bytes, msg_id: str, sent_at: float | None = None) -> dict[str, str]:
    """Headers as Resend (Svix) sends them, signed the documented way."""
    timestamp = str(int(time.time() if sent_at is None else sent_at))
    key = base64.b64decode(RESEND_SECRET.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {
        "svix-id": msg_id,
        "svix-timestamp": timestamp,
        "svix-signature": "v1," + base64.b64encode(digest).decode(),
        "Content-Type": "application/json",
    }


@pytest.fixture
def web(settings: Settings) -> Iterator[Web]:
    """`outbox web` on a free loopback port with both webhooks and no OUTBOX_SECRET."""
    settings = dataclasses.replace(
        settings, postmark_webhook_auth=POSTMARK_AUTH, resend_webhook_secret=RESEND_SECRET
    )
    with pool(settings) as p:
        server = make_server(settings, p, "127.0.0.1", 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield Web(f"http://127.0.0.1:{server.server_address[1]}", settings)
        finally:
            server.shutdown()
            server.server_close()


def send_one(settings: Settings, kind: str, fake: Any, key: str, to: str) -> str:
    """Send one login code through the provider's fake; the provider's id for it."""
    add_login(settings, key, to)
    settings = provider_settings(settings, kind, fake)
    with provider_harness(settings, build_transport(settings)) as h:
        h.run()
    ((provider_id, status),) = query(
        settings,
        "SELECT provider_message_id, status FROM email_outbox WHERE idempotency_key = %s",
        key,
    )
    assert status == "sent"
    return str(provider_id)


def suppression(settings: Settings, address: str) -> suppressions.Suppression | None:
    with psycopg.connect(settings.database_url) as conn:
        return suppressions.find_suppression(conn, address)


def bounces(settings: Settings) -> list[tuple[Any, ...]]:
    return query(
        settings,
        "SELECT source, event_id, link, outbox_id IS NOT NULL, processed_at IS NOT NULL "
        "FROM email_bounce ORDER BY id",
    )


def postmark_bounce(provider_id: str, to: str, **fields: Any) -> dict[str, Any]:
    event = {
        "RecordType": "Bounce",
        "ID": 692560173,
        "Type": "HardBounce",
        "TypeCode": 1,
        "MessageID": provider_id,
        "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
        "Email": to,
        "BouncedAt": "2025-03-05T10:20:31Z",
        "MessageStream": "outbound",
    }
    event.update(fields)
    return event


def test_postmark_hard_bounce_suppresses_the_address(web: Web) -> None:
    with FakePostmark() as fake:
        provider_id = send_one(web.settings, "postmark", fake, "login-pm-1", "gone@example.org")
    assert web.postmark(postmark_bounce(provider_id, "gone@example.org")) == (200, "processed\n")
    found = suppression(web.settings, "gone@example.org")
    assert found is not None
    assert found.reason == "hard_bounce"
    assert query(
        web.settings, "SELECT bounce_class FROM email_outbox WHERE idempotency_key = 'login-pm-1'"
    ) == [("hard",)]
    assert bounces(web.settings) == [("postmark", "Bounce:692560173", "provider_id", True, True)]
    # Postmark retries a call it thinks failed: stored and acted on once.
    assert web.postmark(postmark_bounce(provider_id, "gone@example.org")) == (
        200,
        "already received\n",
    )
    assert len(bounces(web.settings)) == 1
    # Nothing more is queued for the address.
    with psycopg.connect(web.settings.database_url) as conn:
        again = enqueue(
            conn,
            idempotency_key="login-pm-2",
            to="gone@example.org",
            template="login_code",
            params=LOGIN,
            settings=web.settings,
        )
    assert again.suppressed


def test_postmark_policy_refusal_counts_but_does_not_suppress(web: Web) -> None:
    with FakePostmark() as fake:
        provider_id = send_one(web.settings, "postmark", fake, "login-pm-3", "fine@example.org")
    details = "smtp;550 5.7.1 Message rejected due to content restrictions"
    assert web.postmark(postmark_bounce(provider_id, "fine@example.org", Details=details))[0] == 200
    assert suppression(web.settings, "fine@example.org") is None
    assert query(
        web.settings, "SELECT bounce_class FROM email_outbox WHERE idempotency_key = 'login-pm-3'"
    ) == [("soft",)]


def test_postmark_calls_that_fail_authentication_or_parsing_store_nothing(web: Web) -> None:
    event = postmark_bounce("no-such-id", "gone@example.org")
    assert web.postmark(event, auth="postmark-hook:guess")[0] == 401
    assert web.post("/webhooks/postmark", json.dumps(event).encode(), {})[0] == 401
    token = base64.b64encode(POSTMARK_AUTH.encode()).decode()
    auth = {"Authorization": f"Basic {token}"}
    status, text = web.post("/webhooks/postmark", b"{not json", auth)
    assert status == 400
    assert "JSON" in text
    assert web.postmark({"RecordType": "Delivery", "MessageID": "x"}) == (
        200,
        "not a bounce or complaint: ignored\n",
    )
    assert web.post("/webhooks/mailgun", b"{}", auth)[0] == 404
    assert bounces(web.settings) == []
    assert suppression(web.settings, "gone@example.org") is None


def test_a_report_about_mail_not_sent_from_here_is_kept_and_not_acted_on(web: Web) -> None:
    assert web.postmark(postmark_bounce("not-ours", "someone@example.org"))[0] == 200
    assert bounces(web.settings) == [("postmark", "Bounce:692560173", "none", False, True)]
    assert suppression(web.settings, "someone@example.org") is None


def test_resend_complaint_suppresses_the_address(web: Web) -> None:
    with FakeResend() as fake:
        provider_id = send_one(web.settings, "resend", fake, "login-rs-1", "angry@example.org")
    event = {
        "type": "email.complained",
        "created_at": "2025-03-05T10:20:31.000Z",
        "data": {"email_id": provider_id, "to": ["angry@example.org"], "subject": "Your code"},
    }
    assert web.resend(event, msg_id="msg_complaint_1") == (200, "processed\n")
    found = suppression(web.settings, "angry@example.org")
    assert found is not None
    assert found.reason == "complaint"
    assert bounces(web.settings) == [("resend", "msg_complaint_1", "provider_id", True, True)]
    assert web.resend(event, msg_id="msg_complaint_1") == (200, "already received\n")


def test_resend_calls_with_a_bad_or_old_signature_are_refused(web: Web) -> None:
    event = {
        "type": "email.bounced",
        "data": {
            "email_id": "x",
            "to": ["victim@example.org"],
            "bounce": {"type": "Permanent", "subType": "General", "message": "550 5.1.1"},
        },
    }
    body = json.dumps(event).encode()
    headers = svix_headers(body, "msg_forged")
    assert web.post("/webhooks/resend", body.replace(b"victim", b"target"), headers)[0] == 401
    assert web.resend(event, msg_id="msg_old", sent_at=time.time() - 600)[0] == 401
    assert web.post("/webhooks/resend", body, {})[0] == 401
    assert bounces(web.settings) == []


def test_webhooks_without_credentials_are_not_served(settings: Settings) -> None:
    only_postmark = dataclasses.replace(settings, postmark_webhook_auth=POSTMARK_AUTH)
    for configured in (settings, only_postmark):  # nothing configured: the HTTP API alone
        with pool(configured) as p:
            server = make_server(configured, p, "127.0.0.1", 0)
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                web = Web(f"http://127.0.0.1:{server.server_address[1]}", configured)
                assert web.post("/webhooks/resend", b"{}", {})[0] == 404
                unsubscribe = web.post("/unsubscribe?token=x", b"List-Unsubscribe=One-Click", {})
                assert unsubscribe[0] == 404
                assert web.post("/v1/emails", b"{}", {})[0] == 401  # the API asks for a key
            finally:
                server.shutdown()
                server.server_close()


def test_a_report_stored_before_a_crash_is_finished_by_reprocessing(web: Web) -> None:
    with FakePostmark() as fake:
        provider_id = send_one(web.settings, "postmark", fake, "login-pm-9", "late@example.org")
    body = json.dumps(postmark_bounce(provider_id, "late@example.org")).encode()
    with psycopg.connect(web.settings.database_url) as conn:
        # What the endpoint commits before processing; the process died right after.
        bounce_reports.store_report(conn, body, source="postmark", event_id="Bounce:1")
        conn.commit()
        assert suppression(web.settings, "late@example.org") is None
        assert process_pending(conn, web.settings) == 1
    found = suppression(web.settings, "late@example.org")
    assert found is not None
    assert found.reason == "hard_bounce"
    assert bounces(web.settings) == [("postmark", "Bounce:1", "provider_id", True, True)]
