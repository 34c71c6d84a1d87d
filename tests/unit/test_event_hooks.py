"""Events' bodies and cursors, the webhook schedule, signing and target checks."""

from __future__ import annotations

import datetime as dt

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from outbox.errors import ConfigError, InvalidCursor
from outbox.events import hook_signing
from outbox.events.event_body import (
    TYPES,
    Position,
    checked_types,
    event_number,
    feed_event,
    parse_cursor,
)
from outbox.events.hook_target import check_url, refused_address, resolve
from outbox.events.retry_schedule import DELAYS, Answer, next_delay, verdict
from outbox.redact import recipient_tag
from tests.keys import OTHER_SECRET, SECRET


def test_a_cursor_round_trips_and_nothing_else_parses() -> None:
    assert parse_cursor(None) == Position("0", 0)
    assert parse_cursor("") == Position("0", 0)
    assert parse_cursor(Position("745", 12).cursor) == Position("745", 12)
    assert parse_cursor("007.5") == Position("7", 5)
    for bad in ("12", "a.b", "1.2.3", "-1.2", "1.-2", " 1.2", "1.2 ", "99999999999999999999.1"):
        with pytest.raises(InvalidCursor):
            parse_cursor(bad)
    with pytest.raises(InvalidCursor):
        parse_cursor(f"1.{2**63}")


def test_event_ids_and_types() -> None:
    assert event_number("evt_42") == 42
    assert event_number("42") == 42
    assert event_number("evt_x") is None
    assert checked_types(None) is None
    assert checked_types(" ") is None
    assert checked_types("email.bounced, email.sent,email.sent") == ["email.sent", "email.bounced"]
    with pytest.raises(ValueError, match=r"email\.opened"):
        checked_types("email.sent,email.opened")
    assert len(TYPES) == len(set(TYPES)) == 9


ROW = (
    7,
    "900",
    "Alice@Example.com",
    "shop\u241forder-1",
    '{"type": "email.bounced", "timestamp": "2026-12-05T01:00:00.000000Z", "id": 3,'
    ' "message_id": "<m@x>", "provider_id": "Q1", "status": "sent", "reason": "hard bounce",'
    ' "bounce_class": "hard", "tags": ["a"], "metadata": {"k": 1}}',
)


def test_a_feed_event_tags_the_recipient_unless_asked_for_addresses() -> None:
    event = feed_event(ROW, secret=SECRET, addresses=False)
    assert event["id"] == "evt_7"
    assert event["cursor"] == "900.7"
    assert event["type"] == "email.bounced"
    assert event["data"]["to"] == recipient_tag("Alice@Example.com", secret=SECRET)
    assert event["data"]["bounce_class"] == "hard"
    assert event["data"]["idempotency_key"] == "shop\u241forder-1"
    assert set(event["data"]) == {
        "id", "idempotency_key", "message_id", "provider_id", "status", "reason", "tags",
        "metadata", "to", "bounce_class",
    }  # fmt: skip
    clear = feed_event(ROW, secret=SECRET, addresses=True, shown_key=lambda k: k.split("\u241f")[1])
    assert clear["data"]["to"] == "Alice@Example.com"
    assert clear["data"]["idempotency_key"] == "order-1"


def test_answers_and_the_schedule() -> None:
    assert verdict(Answer(200, "")) == "delivered"
    assert verdict(Answer(204, "")) == "delivered"
    for retried in (None, 500, 502, 503, 599, 408, 429):
        assert verdict(Answer(retried, "x")) == "retry"
    for refused in (301, 302, 400, 401, 403, 404, 413, 422):
        assert verdict(Answer(refused, "x")) == "refused"
    assert verdict(Answer(410, "x")) == "gone"
    assert [next_delay(n) for n in range(1, 8)] == [5, 300, 1800, 7200, 18000, 36000, 36000]
    assert next_delay(8) is None
    assert len(DELAYS) == 7
    with pytest.raises(ValueError, match="failure"):
        next_delay(0)


def test_a_sealed_secret_opens_with_its_key_and_a_previous_one() -> None:
    secret = hook_signing.new_secret()
    assert secret.startswith("whsec_")
    sealed = hook_signing.seal(secret, key=SECRET)
    assert secret not in sealed
    assert hook_signing.unseal(sealed, keys=(SECRET,)) == secret
    assert hook_signing.unseal(sealed, keys=(OTHER_SECRET, SECRET)) == secret
    with pytest.raises(ConfigError, match="OUTBOX_PREVIOUS_SECRETS"):
        hook_signing.unseal(sealed, keys=(OTHER_SECRET,))
    with pytest.raises(ConfigError, match="OUTBOX_SECRET"):
        hook_signing.seal(secret, key="")


def test_signed_headers_verify_with_the_standardwebhooks_package() -> None:
    old, new = hook_signing.new_secret(), hook_signing.new_secret()
    now = dt.datetime.now(dt.UTC)
    body = b'{"type":"email.sent"}'
    headers = hook_signing.headers("evt_1", body, (new, old), now=now)
    assert headers["webhook-id"] == "evt_1"
    assert headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert headers["webhook-signature"].count("v1,") == 2
    for secret in (new, old):  # during a rotation either secret verifies
        assert Webhook(secret).verify(body, headers) == {"type": "email.sent"}
    with pytest.raises(WebhookVerificationError):
        Webhook(hook_signing.new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(b'{"type":"email.failed"}', headers)


def test_only_http_urls_without_credentials_are_endpoints() -> None:
    assert (
        check_url("https://hooks.example.com/outbox?x=1") == "https://hooks.example.com/outbox?x=1"
    )
    for bad in (
        "ftp://example.com/",
        "file:///etc/passwd",
        "gopher://example.com",
        "https://",
        "https://user:pw@example.com/",
        "https://example.com/\nx",
        "https://example.com:99999/",
        "https://example.com/" + "a" * 2000,
    ):
        with pytest.raises(ValueError):
            check_url(bad)


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.1.2.3", "a private address"),
        ("192.168.0.1", "a private address"),
        ("172.16.5.4", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fd00::1", "a private address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("0.0.0.0", "a private address"),
        ("100.64.0.1", "not a public address"),
        ("224.0.0.1", "not a public address"),
        ("93.184.216.34", None),
        ("2606:2800:220:1:248:1893:25c8:1946", None),
    ],
)
def test_addresses_refused_unless_public(address: str, why: str | None) -> None:
    assert refused_address(address) == why


def test_a_host_resolving_to_loopback_is_refused_unless_allowed() -> None:
    with pytest.raises(ValueError, match="loopback"):
        resolve("http://localhost:8080/hook", allow_private=False)
    with pytest.raises(ValueError, match="loopback"):
        resolve("http://127.0.0.1:8080/hook", allow_private=False)
    target = resolve("https://127.0.0.1:8443/hook?a=1", allow_private=True)
    assert target.request_url == "https://127.0.0.1:8443/hook?a=1"
    assert target.host_header == "127.0.0.1:8443"
    assert target.sni_hostname is None
    named = resolve("https://localhost/hook", allow_private=True)
    assert named.host_header == "localhost"
    assert named.sni_hostname == "localhost"
    assert "localhost" not in named.request_url
