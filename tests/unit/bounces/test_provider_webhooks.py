"""Provider webhook bodies (Postmark, Resend) become the same results as bounce mail."""

from __future__ import annotations

import json
from typing import Any

import pytest

from outbox.bounce_parsing import providers
from outbox.errors import WebhookError


def postmark(**fields: Any) -> bytes:
    event = {
        "RecordType": "Bounce",
        "ID": 4323372036854775807,
        "Type": "HardBounce",
        "TypeCode": 1,
        "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
        "Description": "The server was unable to deliver your message (ex: unknown user).",
        "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
        "Email": "zoe@example.org",
        "BouncedAt": "2025-03-05T10:20:31Z",
        "Inactive": True,
        "MessageStream": "outbound",
    }
    event.update(fields)
    return json.dumps(event).encode()


def resend(kind: str, **data: Any) -> bytes:
    body = {
        "email_id": "56761188-7520-42d8-8898-ff6fc54ce618",
        "from": "Example Shop <receipts@example.com>",
        "to": ["zoe@example.org"],
        "subject": "Your receipt",
    }
    body.update(data)
    return json.dumps({"type": kind, "created_at": "2025-03-05T10:20:31Z", "data": body}).encode()


def only(report: providers.ProviderReport) -> tuple[str, str | None, str | None, str | None]:
    (result,) = report.results
    return result.klass, result.recipient, result.status, result.reason


def test_postmark_hard_bounce() -> None:
    report = providers.parse("postmark", postmark())
    assert only(report) == ("hard", "zoe@example.org", "5.1.1", "user_unknown")
    assert report.provider_message_id == "883953f4-6105-42a2-a16a-77a8eac79483"
    assert report.event_id == "Bounce:4323372036854775807"


def test_postmark_hard_bounce_quoting_a_policy_refusal_is_soft() -> None:
    details = "smtp;550 5.7.1 Service unavailable; client host blocked using zen.spamhaus.org"
    report = providers.parse("postmark", postmark(Details=details))
    assert only(report)[0] == "soft"
    assert only(report)[3] == "blocked"


def test_postmark_hard_bounce_with_bare_words_keeps_the_providers_class() -> None:
    # Postmark saw the SMTP conversation; its category confirms the words.
    report = providers.parse("postmark", postmark(Details="550 No such user"))
    assert only(report)[:2] == ("hard", "zoe@example.org")
    assert only(report)[3] == "user_unknown"


@pytest.mark.parametrize(
    ("kind", "klass"),
    [
        ("Transient", "soft"),
        ("SoftBounce", "soft"),
        ("DnsError", "soft"),
        ("Blocked", "soft"),
        ("DMARCPolicy", "soft"),
        ("BadEmailAddress", "hard"),
        ("ManuallyDeactivated", "hard"),
        ("AutoResponder", "other"),
        ("SomethingNew", "soft"),
    ],
)
def test_postmark_bounce_types(kind: str, klass: str) -> None:
    report = providers.parse("postmark", postmark(Type=kind, Details=""))
    assert only(report)[0] == klass


def test_postmark_spam_complaint() -> None:
    body = postmark(RecordType="SpamComplaint", Type="SpamComplaint", ID=42, Details="")
    report = providers.parse("postmark", body)
    assert only(report)[:2] == ("complaint", "zoe@example.org")
    assert report.event_id == "SpamComplaint:42"


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("HardBounce", ("hard", "HardBounce")),
        ("SpamComplaint", ("complaint", "SpamComplaint")),
        ("ManualSuppression", ("complaint", "unsubscribe")),
    ],
)
def test_postmark_subscription_change_that_suppresses(
    reason: str, expected: tuple[str, str]
) -> None:
    body = json.dumps(
        {
            "RecordType": "SubscriptionChange",
            "MessageID": "a5909db6-fcd1-4e1f-9a1e-8e2d7e4e2f4e",
            "Recipient": "zoe@example.org",
            "SuppressSending": True,
            "SuppressionReason": reason,
        }
    ).encode()
    (result,) = providers.parse("postmark", body).results
    assert (result.klass, result.reason) == expected


def test_postmark_reactivation_and_other_events_are_no_verdict() -> None:
    reactivated = json.dumps(
        {
            "RecordType": "SubscriptionChange",
            "Recipient": "zoe@example.org",
            "SuppressSending": False,
        }
    ).encode()
    assert providers.parse("postmark", reactivated).results == []
    delivery = json.dumps({"RecordType": "Delivery", "MessageID": "x", "Recipient": "a@b.c"})
    assert providers.parse("postmark", delivery.encode()).results == []


def test_resend_permanent_bounce() -> None:
    bounce = {"type": "Permanent", "subType": "General", "message": "550 5.1.1 user unknown"}
    report = providers.parse("resend", resend("email.bounced", bounce=bounce), "msg_2Kx")
    assert only(report) == ("hard", "zoe@example.org", "5.1.1", "user_unknown")
    assert report.provider_message_id == "56761188-7520-42d8-8898-ff6fc54ce618"
    assert report.event_id == "msg_2Kx"


def test_resend_suppressed_is_hard_and_transient_is_soft() -> None:
    suppressed = {"type": "Permanent", "subType": "Suppressed", "message": ""}
    assert only(providers.parse("resend", resend("email.bounced", bounce=suppressed)))[0] == "hard"
    full = {"type": "Transient", "subType": "MailboxFull", "message": "452 4.2.2 Mailbox full"}
    assert only(providers.parse("resend", resend("email.bounced", bounce=full)))[::3] == (
        "soft",
        "mailbox_full",
    )


def test_resend_complaint_delay_and_other_events() -> None:
    assert only(providers.parse("resend", resend("email.complained")))[0] == "complaint"
    assert only(providers.parse("resend", resend("email.delivery_delayed")))[::3] == (
        "soft",
        "delayed",
    )
    assert providers.parse("resend", resend("email.delivered")).results == []
    assert providers.parse("resend", resend("email.opened")).results == []


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("postmark", b"not json"),
        ("postmark", b"[1, 2]"),
        ("postmark", b'{"MessageID": "x"}'),
        ("postmark", b'{"RecordType": "Mystery"}'),
        ("resend", b'{"type": "contact.created", "data": {}}'),
        ("resend", b'{"type": "email.bounced", "data": []}'),
        ("resend", b"\xff\xfe"),
        ("mailgun", b"{}"),
    ],
)
def test_bodies_that_are_not_events_are_refused(provider: str, body: bytes) -> None:
    with pytest.raises(WebhookError):
        providers.parse(provider, body)
