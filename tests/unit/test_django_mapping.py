"""Django EmailMessage → enqueue's keyword arguments (outbox.django.message_mapping)."""

from __future__ import annotations

import json
from email.mime.text import MIMEText

import pytest
from django.core.mail import EmailMessage, EmailMultiAlternatives

from outbox.django.message_mapping import enqueue_arguments, supported
from outbox.errors import InvalidParams

FROM = "Shop <shop@example.com>"


def keys() -> str:
    return "generated"


def test_everything_a_message_carries_is_mapped() -> None:
    message = EmailMultiAlternatives(
        "Your order",
        "Plain text",
        FROM,
        ["alice@example.com"],
        bcc=["audit@example.com"],
        cc=["bob@example.com"],
        reply_to=["help@example.com"],
        headers={"Idempotency-Key": "order-7", "X-Campaign": "spring"},
    )
    message.attach_alternative("<p>HTML</p>", "text/html")
    message.attach("a.txt", "hello", "text/plain")
    message.attach("b.bin", b"\x00\x01", "application/octet-stream")
    (email,) = enqueue_arguments(message, new_key=keys)
    assert email == {
        "idempotency_key": "order-7",
        "to": "alice@example.com",
        "subject": "Your order",
        "text": "Plain text",
        "html": "<p>HTML</p>",
        "sender": FROM,
        "reply_to": ["help@example.com"],
        "cc": ["bob@example.com"],
        "bcc": ["audit@example.com"],
        "headers": {"X-Campaign": "spring"},  # the Outbox headers are not passed on
        "attachments": [
            {"filename": "a.txt", "content": b"hello", "content_type": "text/plain"},
            {
                "filename": "b.bin",
                "content": b"\x00\x01",
                "content_type": "application/octet-stream",
            },
        ],
    }


def test_a_template_named_in_headers() -> None:
    params = {"name": "Alice", "code": "1"}
    message = EmailMessage(
        "",
        "",
        FROM,
        ["alice@example.com"],
        headers={
            "x-outbox-idempotency-key": "login-1",
            "X-Outbox-Template": "login_code",
            "X-Outbox-Params": json.dumps(params),
            "X-Outbox-Priority": "high",
        },
    )
    (email,) = enqueue_arguments(message, new_key=keys)
    kept, lost = supported(email, {"to", "template", "params", "priority"})
    assert kept == {
        "idempotency_key": "login-1",
        "to": "alice@example.com",
        "template": "login_code",
        "params": params,
        "priority": "high",
    }
    assert lost == ["sender"]  # named: enqueue here takes no sender


def test_the_default_from_is_left_to_outbox_from() -> None:
    message = EmailMessage("S", "T", FROM, ["a@example.com"])
    (email,) = enqueue_arguments(message, new_key=keys, default_from=FROM)
    assert email["sender"] is None
    (other,) = enqueue_arguments(message, new_key=keys, default_from="webmaster@localhost")
    assert other["sender"] == FROM


def test_several_recipients_are_one_email_each_with_copies_on_the_first() -> None:
    message = EmailMessage("S", "T", FROM, ["a@example.com", "b@example.com"], cc=["c@x.org"])
    first, second = enqueue_arguments(message, new_key=keys)
    assert (first["idempotency_key"], second["idempotency_key"]) == ("generated:1", "generated:2")
    assert (first["to"], second["to"]) == ("a@example.com", "b@example.com")
    assert (first["cc"], second["cc"]) == (["c@x.org"], None)


def test_without_a_key_one_is_generated() -> None:
    (email,) = enqueue_arguments(EmailMessage("S", "T", FROM, ["a@example.com"]))
    assert email["idempotency_key"].startswith("django-")
    (other,) = enqueue_arguments(EmailMessage("S", "T", FROM, ["a@example.com"]))
    assert other["idempotency_key"] != email["idempotency_key"]


def test_an_html_body() -> None:
    message = EmailMessage("S", "<b>hi</b>", FROM, ["a@example.com"])
    message.content_subtype = "html"
    (email,) = enqueue_arguments(message, new_key=keys)
    assert (email["text"], email["html"]) == (None, "<b>hi</b>")


def test_a_mime_attachment() -> None:
    message = EmailMessage("S", "T", FROM, ["a@example.com"])
    part = MIMEText("report", "plain")
    part.add_header("Content-Disposition", "attachment", filename="r.txt")
    message.attach(part)
    (email,) = enqueue_arguments(message, new_key=keys)
    assert email["attachments"] == [
        {"filename": "r.txt", "content": b"report", "content_type": "text/plain"}
    ]


def test_supported_names_what_would_be_lost() -> None:
    (email,) = enqueue_arguments(EmailMessage("Hi", "Text", FROM, ["a@example.com"]))
    kept, lost = supported(email, {"to", "template", "params", "priority"})
    assert lost == ["sender", "subject", "text"]
    assert kept == {"idempotency_key": email["idempotency_key"], "to": "a@example.com"}
    everything = set(email)
    assert supported(email, everything)[1] == []


def test_bad_params_json_is_refused() -> None:
    message = EmailMessage("", "", FROM, ["a@example.com"], headers={"X-Outbox-Params": "{"})
    with pytest.raises(InvalidParams, match="X-Outbox-Params must hold a JSON object"):
        enqueue_arguments(message)
