"""Per-message fields (sender, reply-to...) as delivered to a real SMTP server."""

from __future__ import annotations

import dataclasses
import datetime as dt
import email
import email.policy
import json
import re
import time
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import dkim as dkimpy
import psycopg
import pytest

import outbox as outbox_api
from outbox import (
    Cancellation,
    HeaderInjection,
    IdempotencyConflict,
    InvalidContent,
    InvalidField,
    InvalidMessage,
    InvalidParams,
    SenderNotAllowed,
    enqueue,
    enqueue_many,
)
from outbox.config import PACKAGE_TEMPLATES, Settings
from outbox.db.store import suppressions
from outbox.message.dkim import Signers
from outbox.testing.sink import Behaviour, Received
from outbox.transports.base import OutgoingMessage
from tests.integration.helpers import LOGIN, harness, query
from tests.integration.providers.postmark import FakePostmark
from tests.integration.providers.resend import FakeResend
from tests.integration.providers.ses import FakeSes
from tests.integration.test_cli import outbox
from tests.integration.test_providers import (
    _only_loopback,  # noqa: F401  # the providers' fakes need it: autouse, loopback only
    postmark_transport,
    resend_transport,
    ses_transport,
)
from tests.unit.test_dkim import dns_for, ed25519_pem, rsa_pem


def add(settings: Settings, key: str = "k", **fields: Any) -> None:
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn,
            idempotency_key=key,
            to="alice@example.org",
            template="login_code",
            params=LOGIN,
            priority="high",
            settings=settings,
            **fields,
        )
        conn.commit()


def delivered(settings: Settings) -> list[tuple[Received, EmailMessage]]:
    with harness(settings) as (h, sink):
        h.run()
    found = []
    for received in sink.messages:
        message = email.message_from_bytes(received.data, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        assert message.defects == []
        found.append((received, message))
    return found


@pytest.fixture
def shop(settings: Settings, tmp_path: Path) -> Settings:
    """Two sending domains, each with its own DKIM key."""
    (tmp_path / "billing.pem").write_bytes(ed25519_pem())
    (tmp_path / "shop.pem").write_bytes(rsa_pem())
    return dataclasses.replace(
        settings,
        sender="Shop <no-reply@shop.example>",
        sender_domains="shop.example, billing.shop.example",
        dkim_keys=f"billing.shop.example=b1:{tmp_path / 'billing.pem'},"
        f"shop.example=s1:{tmp_path / 'shop.pem'}",
    )


def test_sender_and_reply_to_reach_the_headers_and_sign_with_their_domain(
    shop: Settings,
) -> None:
    add(
        shop,
        "billing",
        sender="Billing, Shop <billing@billing.shop.example>",
        reply_to=["Support <help@example.net>", "hilfe@bücher.example"],
    )
    add(shop, "plain")
    by_key = dict(query(shop, "SELECT message_id, idempotency_key FROM email_outbox"))
    messages = {by_key[m["Message-ID"]]: (r, m) for r, m in delivered(shop)}

    received, message = messages["billing"]
    (author,) = message["From"].addresses
    assert (author.display_name, author.addr_spec) == (
        "Billing, Shop",
        "billing@billing.shop.example",
    )
    replies = [(a.display_name, a.addr_spec) for a in message["Reply-To"].addresses]
    assert replies == [("Support", "help@example.net"), ("", "hilfe@xn--bcher-kva.example")]
    assert received.mail_from == "billing@billing.shop.example"  # no bounce domain: the From
    signers = Signers.from_settings(shop)
    signature = message["DKIM-Signature"].replace(" ", "")
    assert "d=billing.shop.example;" in signature
    assert dkimpy.verify(received.data, dnsfunc=dns_for(signers.by_domain["billing.shop.example"]))

    received, message = messages["plain"]
    assert message["From"] == "Shop <no-reply@shop.example>"
    assert message["Reply-To"] is None
    assert "d=shop.example;" in message["DKIM-Signature"].replace(" ", "")
    assert dkimpy.verify(received.data, dnsfunc=dns_for(signers.by_domain["shop.example"]))


def test_a_sender_outside_the_sending_domains_writes_nothing(shop: Settings) -> None:
    with pytest.raises(SenderNotAllowed, match=r"other\.example"):
        add(shop, sender="x@other.example")
    with pytest.raises(HeaderInjection):
        add(shop, reply_to="help@example.net\r\nBcc: all@example.net")
    assert query(shop, "SELECT count(*) FROM email_outbox") == [(0,)]


def test_the_key_stands_for_the_sender_and_reply_to_too(shop: Settings) -> None:
    add(shop, sender="billing@billing.shop.example", reply_to="help@example.net")
    add(shop, sender="billing@BILLING.shop.example", reply_to=["help@example.net"])  # the same
    with pytest.raises(IdempotencyConflict):
        add(shop, sender="billing@billing.shop.example")
    with pytest.raises(IdempotencyConflict):
        add(shop, reply_to="help@example.net")
    assert query(shop, "SELECT sender, reply_to FROM email_outbox") == [
        ("billing@billing.shop.example", ["help@example.net"])
    ]


def test_a_row_without_fields_hashes_as_before(shop: Settings) -> None:
    add(shop, "old")
    add(shop, "old", sender="Shop <no-reply@shop.example>")  # OUTBOX_FROM given: the same email
    assert query(shop, "SELECT count(*) FROM email_outbox") == [(1,)]


def test_enqueue_many_takes_the_same_fields(shop: Settings) -> None:
    with psycopg.connect(shop.database_url) as conn:
        enqueue_many(
            conn,
            [
                {
                    "idempotency_key": f"nl-{i}",
                    "to": f"r{i}@example.org",
                    "template": "login_code",
                    "params": LOGIN,
                    "sender": "News <news@billing.shop.example>",
                    "reply_to": "editor@example.net",
                }
                for i in range(3)
            ],
            settings=shop,
        )
        conn.commit()
    for _, message in delivered(shop):
        assert message["From"].addresses[0].addr_spec == "news@billing.shop.example"
        assert message["Reply-To"] == "editor@example.net"
    with psycopg.connect(shop.database_url) as conn, pytest.raises(SenderNotAllowed, match="#1"):
        enqueue_many(
            conn,
            [
                {
                    "idempotency_key": "a",
                    "to": "a@example.org",
                    "template": "login_code",
                    "params": LOGIN,
                },
                {
                    "idempotency_key": "b",
                    "to": "b@example.org",
                    "template": "login_code",
                    "params": LOGIN,
                    "sender": "x@evil.example",
                },
            ],
            settings=shop,
        )


def add_inline(settings: Settings, key: str = "inline", **content: Any) -> None:
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn, idempotency_key=key, to="alice@example.org", template=None, settings=settings,
            **content,
        )  # fmt: skip
        conn.commit()


def test_inline_html_goes_with_a_text_part_derived_once(shop: Settings) -> None:
    html = '<h1>Welcome, Ünal</h1><p>Your <a href="https://shop.example/a">account</a>.</p>'
    add_inline(shop, subject="Willkommen bei Shop", html=html, priority="high")
    ((_, message),) = delivered(shop)
    assert message["Subject"] == "Willkommen bei Shop"
    assert message.get_content_type() == "multipart/alternative"
    text, rich = message.iter_parts()
    assert rich.get_content().replace("\r\n", "\n") == html
    assert "Welcome, Ünal" in text.get_content()
    assert "account <https://shop.example/a>" in text.get_content()
    stored = query(shop, "SELECT template, template_version, subject, body_text FROM email_outbox")
    assert stored[0][:3] == ("(inline)", None, "Willkommen bei Shop")
    assert stored[0][3] == text.get_content().replace("\r\n", "\n")


def test_inline_text_only_is_one_plain_part(shop: Settings) -> None:
    add_inline(shop, subject="Plain", text="Just text.\n-- \nShop\n")
    ((_, message),) = delivered(shop)
    assert message.get_content_type() == "text/plain"
    assert message.get_content().replace("\r\n", "\n") == "Just text.\n-- \nShop\n"


def test_every_attempt_sends_the_same_inline_bytes(settings: Settings) -> None:
    # Without DKIM, whose timestamp is the one part that may differ between attempts.
    add_inline(settings, subject="Again", text="Same bytes", html="<p>Same ü bytes</p>")
    ((first, _),) = delivered(settings)
    query(settings, "UPDATE email_outbox SET status = 'pending' RETURNING id")
    ((second, _),) = delivered(settings)
    assert first.data == second.data
    assert query(settings, "SELECT attempts, status FROM email_outbox") == [(2, "sent")]


def test_inline_content_is_part_of_the_key(shop: Settings) -> None:
    add_inline(shop, subject="Hi", text="one")
    add_inline(shop, subject="Hi", text="one")
    with pytest.raises(IdempotencyConflict):
        add_inline(shop, subject="Hi", text="two")
    with pytest.raises(IdempotencyConflict):
        add_inline(shop, subject="Hi!", text="one")
    assert query(shop, "SELECT count(*) FROM email_outbox") == [(1,)]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ({"text": "no subject"}, InvalidContent),
        ({"subject": "no body"}, InvalidContent),
        ({"subject": "a\nb", "text": "x"}, HeaderInjection),
        ({"subject": "x", "text": "x", "params": {"name": "A"}}, InvalidParams),
    ],
)
def test_bad_inline_content_writes_nothing(
    shop: Settings, content: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        add_inline(shop, **content)
    with pytest.raises(InvalidMessage, match="without a template"):
        add(shop, subject="A template has its own subject")
    assert query(shop, "SELECT count(*) FROM email_outbox") == [(0,)]


def test_caller_headers_reach_the_message_and_keep_the_signature(shop: Settings) -> None:
    add(
        shop,
        headers={
            "X-Campaign": "spring-2026",
            "X-Note": "Grüße aus Köln",
            "List-Id": "Shop news <news.shop.example>",
            "In-Reply-To": "<ticket-1@shop.example>",
            "References": "<ticket-0@shop.example> <ticket-1@shop.example>",
        },
    )
    ((received, message),) = delivered(shop)
    assert message["X-Campaign"] == "spring-2026"
    assert message["X-Note"] == "Grüße aus Köln"
    assert b"X-Note: =?utf-8?" in received.data  # encoded, not raw UTF-8
    assert message["List-Id"] == "Shop news <news.shop.example>"
    assert message["In-Reply-To"] == "<ticket-1@shop.example>"
    assert message["References"] == "<ticket-0@shop.example> <ticket-1@shop.example>"
    assert len(message.get_all("From")) == 1
    signer = Signers.from_settings(shop).by_domain["shop.example"]
    assert dkimpy.verify(received.data, dnsfunc=dns_for(signer))


def test_a_refused_header_writes_nothing(shop: Settings) -> None:
    with pytest.raises(InvalidField, match="Bcc"):
        add(shop, headers={"Bcc": "everyone@example.org"})
    with pytest.raises(HeaderInjection):
        add(shop, headers={"X-A": "x\r\nBcc: everyone@example.org"})
    with pytest.raises(InvalidField, match="tag"):
        add(shop, tags=["not a tag"])
    assert query(shop, "SELECT count(*) FROM email_outbox") == [(0,)]


def test_tags_and_metadata_are_stored_shown_and_counted(shop: Settings) -> None:
    metadata = {"order_id": "1001", "customer": "bob@example.net", "items": 3}
    add(shop, "tagged-1", tags=["welcome", "v2"], metadata=metadata)
    add(shop, "tagged-2", tags=["welcome"])
    add(shop, "untagged")
    with pytest.raises(IdempotencyConflict):
        add(shop, "tagged-2", tags=["other"])
    assert query(shop, "SELECT tags, metadata FROM email_outbox WHERE id = 1") == [
        (["welcome", "v2"], metadata)
    ]
    shown = outbox(shop, "show", "tagged-1", "--json")
    assert shown.returncode == 0, shown.stderr
    email_row = json.loads(shown.stdout)["email"]
    assert email_row["tags"] == ["welcome", "v2"]
    assert email_row["metadata"]["order_id"] == "1001"
    assert "bob@example.net" not in shown.stdout  # an address in metadata only as a tag
    text = outbox(shop, "show", "tagged-1")
    assert "welcome" in text.stdout
    assert "bob@example.net" not in text.stdout
    status = outbox(shop, "status", "--tag", "welcome", "--json")
    report = json.loads(status.stdout)
    assert report["tag"] == "welcome"
    assert report["counts"] == [{"status": "pending", "priority": "high", "count": 2}]
    plain = outbox(shop, "status", "--tag", "v2")
    assert "emails tagged v2:" in plain.stdout
    assert re.search(r"pending\s+high\s+1\b", plain.stdout)


def provider_message() -> OutgoingMessage:
    return OutgoingMessage(
        envelope_from="no-reply@shop.example",
        recipient="alice@example.com",
        data=b"From: Shop <no-reply@shop.example>\r\nTo: alice@example.com\r\nSubject: hi\r\n"
        b"Message-ID: <m1@shop.example>\r\nMIME-Version: 1.0\r\n"
        b"Content-Type: text/plain; charset=utf-8\r\n\r\nhello\r\n",
        message_id="<m1@shop.example>",
        idempotency_key="k",
    )


def test_providers_get_the_tags_and_metadata(settings: Settings) -> None:
    message = dataclasses.replace(
        provider_message(),
        tags=("welcome", "v2"),
        metadata=(("order_id", "1001"), ("note", "two words")),
    )
    with FakePostmark() as fake, postmark_transport(fake) as transport:
        transport.send(message)
    (accepted,) = fake.accepted
    assert accepted.email["Tag"] == "welcome"
    assert accepted.email["Metadata"] == {"order_id": "1001", "note": "two words"}
    with FakeResend() as fake_r, resend_transport(fake_r) as resend:
        resend.send(message)
    (sent,) = fake_r.accepted
    assert sent.email["tags"] == [
        {"name": "welcome", "value": "true"},
        {"name": "v2", "value": "true"},
        {"name": "order_id", "value": "1001"},
    ]
    with FakeSes() as fake_s, ses_transport(fake_s) as ses:
        ses.send(message)
    (request,) = fake_s.accepted
    assert request.params["EmailTags"] == [
        {"Name": "welcome", "Value": "true"},
        {"Name": "v2", "Value": "true"},
        {"Name": "order_id", "Value": "1001"},
    ]
    assert b"welcome" not in request.params["Content"]["Raw"]["Data"]  # never in the message


def test_cc_and_bcc_go_in_one_transaction_bcc_in_no_header(shop: Settings) -> None:
    add(shop, cc=["boss@example.org"], bcc=["audit@example.net", "archive@example.net"])
    ((received, message),) = delivered(shop)
    assert received.recipients == [
        "alice@example.org",
        "boss@example.org",
        "audit@example.net",
        "archive@example.net",
    ]
    assert message["To"] == "alice@example.org"
    assert message["Cc"] == "boss@example.org"
    head = received.data.split(b"\r\n\r\n")[0].lower()
    assert b"audit@" not in head
    assert b"archive@" not in head
    assert b"bcc" not in head
    signer = Signers.from_settings(shop).by_domain["shop.example"]
    assert dkimpy.verify(received.data, dnsfunc=dns_for(signer))
    ((recipients,),) = query(shop, "SELECT recipients FROM email_attempt")
    assert [(r["address"], r["kind"], r["code"]) for r in recipients] == [
        ("alice@example.org", "to", 250),
        ("boss@example.org", "cc", 250),
        ("audit@example.net", "bcc", 250),
        ("archive@example.net", "bcc", 250),
    ]


def test_a_refused_cc_or_bcc_does_not_fail_the_message_to_to(shop: Settings) -> None:
    add(shop, cc=["gone@example.org"], bcc=["full@example.net", "ok@example.net"])
    refusals = {
        "gone@example.org": Behaviour(rcpt_reply="550 5.1.1 no such user"),
        "full@example.net": Behaviour(rcpt_reply="452 4.2.2 mailbox full"),
    }
    with harness(shop, lambda rcpt: refusals.get(rcpt, Behaviour())) as (h, sink):
        h.run()
    (received,) = sink.messages
    assert received.recipients == ["alice@example.org", "ok@example.net"]
    assert query(shop, "SELECT status, attempts FROM email_outbox") == [("sent", 1)]
    ((recipients,),) = query(shop, "SELECT recipients FROM email_attempt")
    assert {r["address"]: (r["code"], r["text"]) for r in recipients} == {
        "alice@example.org": (250, "2.1.5 OK"),
        "gone@example.org": (550, "5.1.1 no such user"),
        "full@example.net": (452, "4.2.2 mailbox full"),
        "ok@example.net": (250, "2.1.5 OK"),
    }
    shown = outbox(shop, "show", "k")
    assert "cc  " in shown.stdout
    assert "5.1.1 no such user" in shown.stdout
    assert "gone@example.org" not in shown.stdout  # addresses only as tags


def test_a_refused_to_fails_the_message_for_everyone(shop: Settings) -> None:
    add(shop, cc=["boss@example.org"])
    refused = Behaviour(rcpt_reply="550 5.1.1 no such user")
    with harness(shop, lambda rcpt: refused if rcpt == "alice@example.org" else Behaviour()) as (
        h,
        sink,
    ):
        h.run()
    assert sink.messages == []
    assert query(shop, "SELECT status FROM email_outbox") == [("failed",)]


def test_suppressed_copies_are_dropped_and_recorded(shop: Settings) -> None:
    with psycopg.connect(shop.database_url) as conn:
        suppressions.suppress(conn, "boss@example.org", reason="hard_bounce")
        suppressions.suppress(conn, "reader@example.net", reason="unsubscribe", scope="bulk")
        conn.commit()
    add(shop, "one", cc=["boss@example.org", "ok@example.org"], bcc=["reader@example.net"])
    with psycopg.connect(shop.database_url) as conn:
        enqueue_many(
            conn,
            [
                {"idempotency_key": f"nl-{i}", "to": f"r{i}@example.org", "template": "login_code",
                 "params": LOGIN, "priority": "bulk", "bcc": ["reader@example.net"]}
                for i in range(2)
            ],
            settings=shop,
        )  # fmt: skip
        conn.commit()
    rows = query(shop, "SELECT idempotency_key, cc, bcc, status FROM email_outbox ORDER BY id")
    # A high-priority email: a bulk-only suppression (an unsubscribe) leaves its bcc.
    assert rows[0] == ("one", ["ok@example.org"], ["reader@example.net"], "pending")
    assert [r[1:] for r in rows[1:]] == [(None, None, "pending"), (None, None, "pending")]
    events = query(shop, "SELECT outbox_id, reason FROM email_event ORDER BY outbox_id, id")
    assert events == [
        (1, "cc boss@example.org dropped: suppressed: hard_bounce"),
        (2, "bcc reader@example.net dropped: suppressed: unsubscribe"),
        (3, "bcc reader@example.net dropped: suppressed: unsubscribe"),
    ]
    assert query(shop, "SELECT count(*) FROM email_event WHERE reason LIKE '%%ok@%%'") == [(0,)]
    ((received, _), *_) = delivered(shop)
    assert "boss@example.org" not in received.recipients


def test_providers_get_cc_and_bcc(settings: Settings) -> None:
    message = dataclasses.replace(
        provider_message(), cc=("boss@example.org",), bcc=("audit@example.net",)
    )
    with FakePostmark() as fake, postmark_transport(fake) as transport:
        transport.send(message)
    (accepted,) = fake.accepted
    assert (accepted.email["Cc"], accepted.email["Bcc"]) == (
        "boss@example.org",
        "audit@example.net",
    )
    with FakeResend() as fake_r, resend_transport(fake_r) as resend:
        resend.send(message)
    (sent,) = fake_r.accepted
    assert (sent.email["cc"], sent.email["bcc"]) == (["boss@example.org"], ["audit@example.net"])
    with FakeSes() as fake_s, ses_transport(fake_s) as ses:
        ses.send(message)
    (request,) = fake_s.accepted
    assert request.params["Destination"] == {
        "ToAddresses": ["alice@example.com"],
        "CcAddresses": ["boss@example.org"],
        "BccAddresses": ["audit@example.net"],
    }
    assert b"audit@" not in request.params["Content"]["Raw"]["Data"]


def test_a_scheduled_email_waits_until_its_time(shop: Settings) -> None:
    began = time.time()
    soon = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
    add(shop, "soon", send_at=soon)
    add(shop, "tomorrow", send_at=later.astimezone(dt.timezone(dt.timedelta(hours=-5))))
    add(shop, "now")
    with psycopg.connect(shop.database_url) as conn:
        enqueue_many(
            conn,
            [{"idempotency_key": "batch-later", "to": "b@example.org", "template": "login_code",
              "params": LOGIN, "send_at": later}],
            settings=shop,
        )  # fmt: skip
        conn.commit()
    rows = dict(query(shop, "SELECT idempotency_key, next_attempt_at FROM email_outbox"))
    assert rows["tomorrow"] == later
    assert rows["batch-later"] == later
    assert rows["soon"] == soon
    report = json.loads(outbox(shop, "status", "--json").stdout)
    counts = {(c["status"], c["priority"]): c["count"] for c in report["counts"]}
    assert counts == {("scheduled", "high"): 3, ("pending", "high"): 1}
    # Ages count from the enqueues above (0 while only scheduled rows wait).
    assert all(0 <= age <= time.time() - began for age in report["oldest_unsent_seconds"].values())
    with harness(shop) as (h, sink):
        h.relay.run_round()
        while h.groups:
            h.delivery.deliver(h.groups.pop(0))
        assert len(sink.messages) == 1  # only "now"
        # Its time comes: moved to now rather than waited for, so that the round
        # above came before it however long a loaded machine took to get there.
        query(
            shop,
            "UPDATE email_outbox SET send_at = now(), next_attempt_at = now()"
            " WHERE idempotency_key = 'soon' RETURNING id",
        )
        h.relay.run_round()
        while h.groups:
            h.delivery.deliver(h.groups.pop(0))
        assert len(sink.messages) == 2
    assert dict(query(shop, "SELECT idempotency_key, status FROM email_outbox")) == {
        "now": "sent", "soon": "sent", "tomorrow": "pending", "batch-later": "pending",
    }  # fmt: skip


@pytest.mark.slow
def test_the_age_limit_counts_from_send_at(shop: Settings) -> None:
    a_day_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    in_a_moment = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    add(shop, "late", send_at=in_a_moment)
    add(shop, "old")
    # Both enqueued long ago; "late" was scheduled for a moment from now.
    query(shop, "UPDATE email_outbox SET created_at = %s RETURNING id", a_day_ago)
    ages = dict(query(shop, "SELECT idempotency_key, greatest(created_at, requeued_at, send_at)"
                            " FROM email_outbox"))  # fmt: skip
    assert ages["old"] == a_day_ago
    assert ages["late"] == in_a_moment
    time.sleep(1.2)
    short = dataclasses.replace(shop, max_age_seconds=3600)
    with harness(short, lambda rcpt: Behaviour(data_reply="451 4.3.0 later")) as (h, _):
        h.relay.run_round()
        while h.groups:
            h.delivery.deliver(h.groups.pop(0))
    assert dict(query(shop, "SELECT idempotency_key, status FROM email_outbox")) == {
        "old": "dead", "late": "pending",
    }  # fmt: skip


def test_a_naive_send_at_writes_nothing(shop: Settings) -> None:
    with pytest.raises(InvalidMessage, match="naive"):
        add(shop, send_at=dt.datetime.now() + dt.timedelta(hours=1))
    assert query(shop, "SELECT count(*) FROM email_outbox") == [(0,)]


def test_cancel_in_the_callers_transaction(shop: Settings) -> None:
    in_an_hour = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    add(shop, "order-1", send_at=in_an_hour)
    with psycopg.connect(shop.database_url) as conn:
        result = outbox_api.cancel(conn, "order-1", reason="order refunded", by="support:ana")
        assert result == Cancellation(True, "cancelled", 1)
        conn.rollback()  # the caller's business change failed: nothing was cancelled
    assert query(shop, "SELECT status FROM email_outbox") == [("pending",)]
    with psycopg.connect(shop.database_url) as conn:
        assert outbox_api.cancel(conn, "order-1", reason="order refunded", by="support:ana")
        conn.commit()
    assert query(shop, "SELECT to_status, reason, actor FROM email_event") == [
        ("cancelled", "cancelled: order refunded", "support:ana")
    ]
    with psycopg.connect(shop.database_url) as conn:
        again = outbox_api.cancel(conn, "order-1", reason="twice", by="support:ana")
        unknown = outbox_api.cancel(conn, "no-such-key", reason="x", by="y")
    assert again == Cancellation(False, "cancelled", 1)
    assert unknown == Cancellation(False, None)
    with psycopg.connect(shop.database_url) as conn:  # the key stays taken
        same = enqueue(
            conn, idempotency_key="order-1", to="alice@example.org", template="login_code",
            params=LOGIN, priority="high", send_at=in_an_hour, settings=shop,
        )  # fmt: skip
    assert (same.created, same.status) == (False, "cancelled")


def test_cancel_with_the_key_alone(shop: Settings) -> None:
    """Who and why are optional: the connection's application name, else "application"."""
    for key in ("a", "b", "c"):
        add(shop, key)
    with psycopg.connect(shop.database_url) as conn:
        assert outbox_api.cancel(conn, "a")
        conn.commit()
    with psycopg.connect(shop.database_url, application_name="shop-web") as conn:
        assert outbox_api.cancel(conn, "b")
        assert outbox_api.cancel(conn, "c", reason="order refunded")
        conn.commit()
    assert query(
        shop,
        "SELECT o.idempotency_key, o.status_reason, e.reason, e.actor FROM email_event e"
        " JOIN email_outbox o ON o.id = e.outbox_id ORDER BY o.idempotency_key",
    ) == [
        ("a", "cancelled", "cancelled", "application"),
        ("b", "cancelled", "cancelled", "shop-web"),
        ("c", "cancelled: order refunded", "cancelled: order refunded", "shop-web"),
    ]
    add(shop, "d")
    by_cli = outbox(shop, "cancel", "d")  # no --reason: none recorded
    assert by_cli.returncode == 0, by_cli.stderr
    assert query(
        shop,
        "SELECT e.reason, e.actor LIKE 'cli:%%' FROM email_event e"
        " JOIN email_outbox o ON o.id = e.outbox_id WHERE o.idempotency_key = 'd'",
    ) == [("cancelled", True)]
    with (
        pytest.raises(InvalidMessage, match="reason must be a non-empty string"),
        psycopg.connect(shop.database_url) as conn,
    ):
        outbox_api.cancel(conn, "a", reason="  ")


def test_a_queued_email_cancelled_is_skipped_by_the_worker(shop: Settings) -> None:
    add(shop, "k")
    with harness(shop) as (h, sink):
        h.relay.run_round()
        assert query(shop, "SELECT status FROM email_outbox") == [("queued",)]
        result = outbox(shop, "cancel", "k", "--reason", "user deleted", "--by", "ops:bo")
        assert result.returncode == 0, result.stderr
        assert "cancelled email 1" in result.stdout
        while h.groups:
            h.delivery.deliver(h.groups.pop(0))  # the id arrives anyway: nothing is sent
    assert sink.messages == []
    assert query(shop, "SELECT status, attempts FROM email_outbox") == [("cancelled", 0)]
    late = outbox(shop, "cancel", "k", "--reason", "again")
    assert late.returncode == 1
    assert "not cancelled: the email is cancelled" in late.stderr


def test_a_sent_email_cannot_be_cancelled(shop: Settings) -> None:
    add(shop, "k")
    delivered(shop)
    with psycopg.connect(shop.database_url) as conn:
        result = outbox_api.cancel(conn, "k", reason="too late", by="ops")
    assert result == Cancellation(False, "sent", 1)
    assert outbox(shop, "cancel", "none", "--reason", "x").returncode == 1


def test_a_template_with_layouts_is_sent_as_stored(shop: Settings, tmp_path: Path) -> None:
    from tests.unit.test_layouts import BASE_MJML, CHILD_MJML, FOOTER_MJML, write  # noqa: PLC0415

    write(
        tmp_path,
        {
            "_layouts/base.mjml": BASE_MJML,
            "_layouts/footer.mjml": FOOTER_MJML,
            "code/subject.txt": "Your code",
            "code/body.mjml": CHILD_MJML,
        },
    )
    settings = dataclasses.replace(shop, templates=tmp_path)
    with psycopg.connect(settings.database_url) as conn:
        enqueue(
            conn, idempotency_key="k", to="alice@example.org", template="code",
            params={"product": "Shop", "name": "Ana", "code": "424242"}, settings=settings,
        )  # fmt: skip
        conn.commit()
    ((files,),) = query(
        settings,
        "SELECT files FROM email_template_version"
        " WHERE hash = (SELECT template_version FROM email_outbox)",
    )
    assert {"_layouts/base.mjml", "_layouts/footer.mjml", "body.mjml"} <= set(files)
    # The worker reads another directory: it renders the version stored at enqueue.
    worker = dataclasses.replace(settings, templates=PACKAGE_TEMPLATES)
    ((_, message),) = delivered(worker)
    text, html = message.iter_parts()
    assert "Sent by Shop to Ana" in html.get_content()
    assert "Code: 424242" in html.get_content()
    assert "Sent by Shop to Ana" in text.get_content()  # derived from the whole HTML


def test_a_locale_picks_the_template_variant_with_fallback(shop: Settings, tmp_path: Path) -> None:
    from tests.unit.test_layouts import write  # noqa: PLC0415

    write(
        tmp_path,
        {
            "greeting/subject.txt": "Hello {{ name }}",
            "greeting/body.txt": "Hello {{ name }}\n",
            "greeting/de/subject.txt": "Hallo {{ name }}",
            "greeting/de/body.txt": "Hallo {{ name }}\n",
            "greeting/de-AT/subject.txt": "Servus {{ name }}",
            "greeting/de-AT/body.txt": "Servus {{ name }}\n",
        },
    )
    settings = dataclasses.replace(shop, templates=tmp_path)
    with psycopg.connect(settings.database_url) as conn:
        for key, locale in (("at", "de-at"), ("ch", "de-CH"), ("fr", "fr"), ("none", None)):
            enqueue(
                conn, idempotency_key=key, to=f"{key}@example.org", template="greeting",
                params={"name": "Ana"}, locale=locale, settings=settings,
            )  # fmt: skip
        conn.commit()
    assert dict(query(settings, "SELECT idempotency_key, locale FROM email_outbox")) == {
        "at": "de-AT", "ch": "de", "fr": None, "none": None,
    }  # fmt: skip
    worker = dataclasses.replace(settings, templates=PACKAGE_TEMPLATES)  # renders stored versions
    subjects = {str(m["To"]).partition("@")[0]: m["Subject"] for _, m in delivered(worker)}
    assert subjects == {
        "at": "Servus Ana",
        "ch": "Hallo Ana",
        "fr": "Hello Ana",
        "none": "Hello Ana",
    }
    with psycopg.connect(settings.database_url) as conn, pytest.raises(InvalidMessage):
        enqueue(
            conn, idempotency_key="bad", to="a@example.org", template="greeting",
            params={"name": "Ana"}, locale="deutsch", settings=settings,
        )  # fmt: skip


def test_templates_check_fails_on_a_variant(settings: Settings, tmp_path: Path) -> None:
    from tests.unit.test_layouts import write  # noqa: PLC0415

    write(
        tmp_path,
        {
            "greeting/subject.txt": "Hello {{ name }}",
            "greeting/body.txt": "Hello {{ name }}\n",
            "greeting/template.toml": '[example]\nname = "Ana"\n',
            "greeting/de/subject.txt": "Hallo {{ name }}",
            "greeting/de/body.txt": "Hallo {{ vorname }}\n",
        },
    )
    result = outbox(dataclasses.replace(settings, templates=tmp_path), "templates", "check")
    assert result.returncode == 1
    assert "ok   greeting " in result.stdout
    assert "FAIL greeting/de:" in result.stdout
    assert "vorname" in result.stdout


def test_files_by_content_are_stored_once_and_sent(shop: Settings) -> None:
    terms = b"%PDF-1.4 terms " + bytes(range(256)) * 20
    invoice = b"%PDF-1.4 invoice 1"
    add(shop, "a", attachments=[
        {"filename": "Invoice-1.pdf", "content": invoice},
        {"filename": "Terms.pdf", "content": terms},
    ])  # fmt: skip
    with psycopg.connect(shop.database_url) as conn:
        enqueue_many(
            conn,
            [{"idempotency_key": "b", "to": "b@example.org", "template": "login_code",
              "params": LOGIN, "attachments": [{"filename": "AGB.pdf", "content": terms}]}],
            settings=shop,
        )  # fmt: skip
        conn.commit()
    assert query(shop, "SELECT count(*), sum(size) FROM email_attachment_blob") == [
        (2, len(terms) + len(invoice))
    ]
    messages = {str(m["To"]): m for _, m in delivered(shop)}
    parts = list(messages["alice@example.org"].iter_attachments())
    assert [(p.get_filename(), p.get_content()) for p in parts] == [
        ("Invoice-1.pdf", invoice),
        ("Terms.pdf", terms),
    ]
    (agb,) = messages["b@example.org"].iter_attachments()
    assert (agb.get_filename(), agb.get_content_type(), agb.get_content()) == (
        "AGB.pdf", "application/pdf", terms,
    )  # fmt: skip
    # Retention follows the row: a file goes with the last row that uses it.
    query(shop, "DELETE FROM email_outbox WHERE idempotency_key = 'a' RETURNING id")
    assert query(shop, "SELECT size FROM email_attachment_blob") == [(len(terms),)]
    query(shop, "DELETE FROM email_outbox WHERE idempotency_key = 'b' RETURNING id")
    assert query(shop, "SELECT count(*) FROM email_attachment_blob") == [(0,)]
    assert query(shop, "SELECT count(*) FROM email_attachment_use") == [(0,)]


def test_files_by_content_are_part_of_the_key_and_limited(shop: Settings) -> None:
    add(shop, "k", attachments=[{"filename": "a.txt", "content": b"one"}])
    add(shop, "k", attachments=[{"filename": "a.txt", "content": b"one"}])  # the same email
    with pytest.raises(IdempotencyConflict):
        add(shop, "k", attachments=[{"filename": "a.txt", "content": b"two"}])
    small = dataclasses.replace(shop, max_attachment_bytes=10)
    with pytest.raises(InvalidParams, match="over the limit of 10"):
        add(small, "big", attachments=[{"filename": "a.bin", "content": b"x" * 11}])
    assert query(shop, "SELECT idempotency_key FROM email_outbox") == [("k",)]
    assert query(shop, "SELECT count(*) FROM email_attachment_blob") == [(1,)]


def test_the_relay_sleeps_until_the_next_scheduled_row(shop: Settings) -> None:
    settings = dataclasses.replace(shop, poll_interval=30.0)
    add(settings, "soon", send_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3))
    add(settings, "later", send_at=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1))
    with harness(settings) as (h, _):
        wait = h.relay._until_next_due()
    assert wait <= 3.0  # woken for "soon", not after the 30 s poll interval


def test_enqueue_many_with_every_field_takes_either_way_in(shop: Settings) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)

    def batch(n: int) -> list[dict[str, Any]]:
        return [
            {
                "idempotency_key": f"all-{i}", "to": f"r{i}@example.org", "template": "login_code",
                "params": LOGIN, "sender": "Billing <billing@billing.shop.example>",
                "reply_to": ["help@example.net"], "headers": {"X-Campaign": "c1"},
                "tags": ["t1"], "metadata": {"n": i}, "cc": ["boss@example.org"],
                "bcc": ["audit@example.net"], "send_at": later, "locale": "de",
                "attachments": [{"filename": "a.txt", "content": b"same for all"}],
            }
            for i in range(n)
        ]  # fmt: skip

    with psycopg.connect(shop.database_url) as conn:
        first = enqueue_many(conn, batch(2), settings=shop)  # COPY straight in
        conn.commit()
    with psycopg.connect(shop.database_url) as conn:
        again = enqueue_many(conn, batch(3), settings=shop)  # known keys: the staging table
        conn.commit()
    assert [r.created for r in first] == [True, True]
    assert [r.created for r in again] == [False, False, True]
    rows = query(
        shop,
        "SELECT sender, reply_to, headers, tags, metadata, cc, bcc, send_at, next_attempt_at,"
        " attachments->0->>'filename' FROM email_outbox ORDER BY id",
    )
    assert len(rows) == 3
    for index, row in enumerate(rows):
        assert row == (
            "Billing <billing@billing.shop.example>", ["help@example.net"],
            [["X-Campaign", "c1"]], ["t1"], {"n": index}, ["boss@example.org"],
            ["audit@example.net"], later, later, "a.txt",
        )  # fmt: skip
    assert query(shop, "SELECT count(*) FROM email_attachment_blob") == [(1,)]
    assert query(shop, "SELECT count(*) FROM email_attachment_use") == [(3,)]
