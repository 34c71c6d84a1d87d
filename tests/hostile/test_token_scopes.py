"""What a token found in a message lets its reader do: a cc or bcc reader, the
List-Unsubscribe mailto, a previous release's tokens, provider ids that repeat,
and the bounce server's size refusal. Real sends to a sink, real Postgres."""

from __future__ import annotations

import base64
import dataclasses
import email
import email.policy
import json
import smtplib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from outbox import enqueue
from outbox.bounce_receiving import smtp_server
from outbox.bounce_receiving.smtp_server import REFUSED, BounceServer
from outbox.bounce_receiving.webhooks import ProviderWebhooks
from outbox.config import Settings
from outbox.db.store import suppressions
from outbox.testing.sink import Behaviour, SmtpSink
from outbox.token_signatures import sign
from tests.integration.helpers import LOGIN, NEWS, harness, pool, query
from tests.integration.test_bounces import BOUNCE_DOMAIN, arf, dsn, run_ingest
from tests.integration.test_webhooks import POSTMARK_AUTH, postmark_bounce
from tests.keys import SECRET

CUSTOMER = "customer@example.com"


@pytest.fixture
def shop(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings,
        bounce_domain=BOUNCE_DOMAIN,
        secret=SECRET,
        unsubscribe_url="https://shop.example/unsubscribe",
        bounce_port=SmtpSink().port,
        postmark_webhook_auth=POSTMARK_AUTH,
    )


def add(settings: Settings, key: str, *, priority: str = "high", **fields: Any) -> int:
    template, params = ("login_code", LOGIN) if priority == "high" else ("newsletter", NEWS)
    with psycopg.connect(settings.database_url) as conn:
        result = enqueue(
            conn,
            idempotency_key=key,
            to=CUSTOMER,
            template=template,
            params=params,
            priority=priority,
            settings=settings,
            **fields,
        )
        conn.commit()
    return result.id


def send(settings: Settings, behaviour: Behaviour | None = None) -> list[Any]:
    """Deliver what is pending to a sink: what each reader's copy carries."""
    with harness(settings, (lambda _: behaviour) if behaviour else None) as (h, sink):
        h.run()
    return list(sink.messages)


def message_id_of(settings: Settings, row_id: int) -> str:
    return str(query(settings, "SELECT message_id FROM email_outbox WHERE id = %s", row_id)[0][0])


def blocked(settings: Settings, address: str) -> suppressions.Suppression | None:
    with psycopg.connect(settings.database_url) as conn:
        return suppressions.find_suppression(conn, address)


def stored_link(settings: Settings, bounce_id: int) -> tuple[Any, ...]:
    sql = "SELECT outbox_id, link, processed_at IS NOT NULL FROM email_bounce WHERE id = %s"
    return query(settings, sql, bounce_id)[0]


@pytest.mark.parametrize("copy", ["cc", "bcc"])
def test_regression_a_cc_or_bcc_reader_cannot_suppress_the_customer(
    shop: Settings, copy: str
) -> None:
    """Every copy carried the row's one token: a colleague's made-up 5.1.1 for
    the customer, sent to the Return-Path of their copy, stopped login codes."""
    row_id = add(shop, "k1", **{copy: ["colleague@example.org"]})
    (received,) = send(shop)
    assert "colleague@example.org" in received.recipients
    their_return_path = received.mail_from
    forged = dsn(CUSTOMER, message_id_of(shop, row_id), to=their_return_path)
    done = run_ingest(shop, forged, their_return_path)
    assert done.suppressed == []
    assert blocked(shop, CUSTOMER) is None
    # Recorded against its row all the same.
    assert stored_link(shop, done.bounce_id) == (row_id, "verp", True)


def test_regression_a_report_naming_another_recipient_is_recorded_not_acted_on(
    shop: Settings,
) -> None:
    row_id = add(shop, "k1")
    (received,) = send(shop)
    report = dsn("someone.else@example.net", message_id_of(shop, row_id), to=received.mail_from)
    done = run_ingest(shop, report, received.mail_from)
    assert done.suppressed == []
    assert blocked(shop, CUSTOMER) is None
    assert blocked(shop, "someone.else@example.net") is None
    assert stored_link(shop, done.bounce_id) == (row_id, "verp", True)


def test_the_customers_own_bounce_still_suppresses(shop: Settings) -> None:
    row_id = add(shop, "k1")
    (received,) = send(shop)
    report = dsn(CUSTOMER, message_id_of(shop, row_id), to=received.mail_from)
    done = run_ingest(shop, report, received.mail_from)
    assert done.suppressed == [CUSTOMER]
    entry = blocked(shop, CUSTOMER)
    assert entry is not None
    assert (entry.reason, entry.scope) == ("hard_bounce", "all")


def _mailto(received: Any) -> str:
    message = email.message_from_bytes(received.data, policy=email.policy.default)
    header = str(message["List-Unsubscribe"])
    return header.split("mailto:", 1)[1].split("?", 1)[0]


def test_regression_the_unsubscribe_mailto_cannot_block_the_reader(shop: Settings) -> None:
    """A hard DSN sent to a newsletter's List-Unsubscribe mailto suppressed its
    reader with scope `all`: no more login codes."""
    row_id = add(shop, "n1", priority="bulk")
    (received,) = send(shop)
    mailto = _mailto(received)
    message_id = message_id_of(shop, row_id)
    hard = run_ingest(shop, dsn(CUSTOMER, message_id, to=mailto), mailto)
    assert hard.suppressed == []
    complaint = run_ingest(shop, arf(CUSTOMER, message_id, return_path=mailto), mailto)
    entry = blocked(shop, CUSTOMER)
    assert entry is None or entry.scope == "bulk"
    assert complaint.link.outbox_id == row_id
    assert stored_link(shop, hard.bounce_id) == (row_id, "verp", True)


def test_the_unsubscribe_mailto_still_unsubscribes(shop: Settings) -> None:
    add(shop, "n1", priority="bulk")
    (received,) = send(shop)
    mailto = _mailto(received)
    request = (
        f"From: {CUSTOMER}\r\nTo: {mailto}\r\nSubject: unsubscribe\r\n\r\nunsubscribe\r\n"
    ).encode()
    done = run_ingest(shop, request, mailto)
    assert done.suppressed == [CUSTOMER]
    entry = blocked(shop, CUSTOMER)
    assert entry is not None
    assert (entry.reason, entry.scope) == ("unsubscribe", "bulk")


def test_the_unsubscribe_mailto_is_not_the_return_path(shop: Settings) -> None:
    add(shop, "n1", priority="bulk")
    (received,) = send(shop)
    assert _mailto(received) != received.mail_from


def _previous_release_token(row_id: int) -> str:
    """``bounces+<id in base 36>-<HMAC>``: Return-Path and mailto alike."""
    digits, payload, number = "0123456789abcdefghijklmnopqrstuvwxyz", "", row_id
    while True:
        number, rest = divmod(number, 36)
        payload = digits[rest] + payload
        if not number:
            break
    return f"bounces+{payload}-{sign(SECRET, 'verp', payload)}@{BOUNCE_DOMAIN}"


def test_regression_a_previous_release_newsletter_token_only_unsubscribes(
    shop: Settings,
) -> None:
    """The previous release put the Return-Path's token in the mailto too."""
    row_id = add(shop, "n1", priority="bulk")
    send(shop)
    old = _previous_release_token(row_id)
    done = run_ingest(shop, dsn(CUSTOMER, message_id_of(shop, row_id), to=old), old)
    assert done.suppressed == []
    assert stored_link(shop, done.bounce_id) == (row_id, "verp", True)
    request = f"From: {CUSTOMER}\r\nTo: {old}\r\nSubject: unsubscribe\r\n\r\nx\r\n".encode()
    assert run_ingest(shop, request, old).suppressed == [CUSTOMER]
    entry = blocked(shop, CUSTOMER)
    assert entry is not None
    assert entry.scope == "bulk"


def test_a_previous_release_login_code_token_still_acts(shop: Settings) -> None:
    row_id = add(shop, "k1")
    send(shop)
    old = _previous_release_token(row_id)
    done = run_ingest(shop, dsn(CUSTOMER, message_id_of(shop, row_id), to=old), old)
    assert done.suppressed == [CUSTOMER]


def test_regression_a_previous_release_token_with_copies_is_recorded_only(
    shop: Settings,
) -> None:
    row_id = add(shop, "k1", cc=["colleague@example.org"])
    send(shop)
    old = _previous_release_token(row_id)
    done = run_ingest(shop, dsn(CUSTOMER, message_id_of(shop, row_id), to=old), old)
    assert done.suppressed == []
    assert stored_link(shop, done.bounce_id) == (row_id, "verp", True)


@pytest.fixture
def webhooks(shop: Settings) -> Iterator[ProviderWebhooks]:
    with pool(shop) as p:
        yield ProviderWebhooks(shop, p)


def _postmark(hooks: ProviderWebhooks, event: dict[str, Any]) -> None:
    auth = "Basic " + base64.b64encode(POSTMARK_AUTH.encode()).decode()
    status, text = hooks.handle("postmark", {"Authorization": auth}, json.dumps(event).encode())
    assert status == 200, text


def test_regression_a_webhook_cannot_match_a_row_sent_over_smtp(
    shop: Settings, webhooks: ProviderWebhooks
) -> None:
    """A relay's queue id is a provider id too, and it repeats: a Postmark
    event with the same id suppressed the recipient of a row sent over SMTP."""
    row_id = add(shop, "k1")
    send(shop, Behaviour(data_reply="250 2.0.0 Ok: queued as 4F2A1B"))
    pmid = query(shop, "SELECT provider_message_id FROM email_outbox WHERE id = %s", row_id)
    assert pmid == [("4F2A1B",)]
    _postmark(webhooks, postmark_bounce("4F2A1B", CUSTOMER))
    assert blocked(shop, CUSTOMER) is None
    assert query(shop, "SELECT outbox_id, link FROM email_bounce") == [(None, "none")]


def test_a_repeated_provider_id_names_the_latest_row_sent_before_the_report(
    shop: Settings, webhooks: ProviderWebhooks
) -> None:
    older = add(shop, "k1")
    newer = add(shop, "k2")
    later = add(shop, "k3")
    send(shop)
    for row_id, sent in ((older, "-2 days"), (newer, "-1 hour"), (later, "+1 hour")):
        with psycopg.connect(shop.database_url) as conn:
            conn.execute(
                "UPDATE email_outbox SET provider_message_id = 'same', "
                "sent_at = now() + %s::interval WHERE id = %s",
                (sent, row_id),
            )
            conn.execute(
                "UPDATE email_attempt SET transport = 'postmark' WHERE outbox_id = %s", (row_id,)
            )
    _postmark(webhooks, postmark_bounce("same", CUSTOMER))
    assert query(shop, "SELECT outbox_id, link FROM email_bounce") == [(newer, "provider_id")]


def _refused(reason: str) -> float:
    return float(REFUSED.labels(reason)._value.get())


@pytest.fixture
def bounce_server(shop: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[BounceServer]:
    monkeypatch.setattr(smtp_server, "MAX_BOUNCE_BYTES", 64 * 1024)
    with ConnectionPool(shop.database_url, min_size=1, max_size=2) as p:
        running = BounceServer(shop, p)
        running.start()
        try:
            yield running
        finally:
            running.stop()


def test_regression_a_size_refusal_is_counted(shop: Settings, bounce_server: BounceServer) -> None:
    before = _refused("size")
    rcpt = f"bounces@{BOUNCE_DOMAIN}"
    with smtplib.SMTP("127.0.0.1", shop.bounce_port, timeout=30) as client:
        client.ehlo()
        # Declared too big at MAIL (RFC 1870), then too big in fact.
        assert client.mail("", ["SIZE=99999999"])[0] == 552
        client.rset()
        assert client.mail("")[0] == 250  # no SIZE declared
        assert client.rcpt(rcpt)[0] == 250
        assert client.data(b"Subject: x\r\n\r\n" + (b"x" * 76 + b"\r\n") * 1200)[0] == 552
    assert _refused("size") - before == 2
    assert query(shop, "SELECT count(*) FROM email_bounce") == [(0,)]
