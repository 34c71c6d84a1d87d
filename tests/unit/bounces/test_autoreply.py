"""Auto-replies are not bounces; bounces that carry Auto-Submitted still are."""

from __future__ import annotations

import pytest

from outbox.bounce_parsing import parse_bounce
from outbox.bounce_parsing.autoreply import is_auto_reply, looks_like_bounce
from outbox.bounce_parsing.mime import load

from .conftest import fixture_bytes


def message(headers: str, body: str = "Hello.\n") -> bytes:
    return (headers.strip() + "\n\n" + body).encode("utf-8")


@pytest.mark.parametrize(
    "headers",
    [
        "From: a@example.org\nSubject: Re: hi\nAuto-Submitted: auto-replied",
        "From: a@example.org\nSubject: Re: hi\nX-Autoreply: yes",
        "From: a@example.org\nSubject: Re: hi\nX-Autorespond: yes",
        "From: a@example.org\nSubject: Re: hi\nPrecedence: auto_reply",
        "From: a@example.org\nSubject: Out of Office: hi",
        "From: a@example.org\nSubject: Automatic reply: hi",
        "From: a@example.org\nSubject: Auto: hi",
        "From: a@example.org\nSubject: =?utf-8?q?Abwesenheitsnotiz=3A_hi?=",
        "From: a@example.org\nSubject: =?utf-8?q?R=C3=A9ponse_automatique_=3A_hi?=",
        "From: a@example.org\nSubject: =?utf-8?q?Risposta_automatica=3A_hi?=",
        "From: a@example.org\nSubject: =?utf-8?b?6Ieq5YuV5b+c562UOiBoaQ==?=",
        "From: a@example.org\nSubject: Away until Monday",
    ],
)
def test_auto_replies_are_recognised_and_ignored(headers: str) -> None:
    raw = message(headers, "I am away and will answer when I am back.\n")
    msg = load(raw)
    assert msg is not None
    assert is_auto_reply(msg)
    assert not looks_like_bounce(msg, "I am away and will answer when I am back.")
    assert parse_bounce(raw) == []


def test_ordinary_mail_is_neither() -> None:
    raw = message("From: a@example.org\nTo: b@example.com\nSubject: Lunch?")
    msg = load(raw)
    assert msg is not None
    assert not is_auto_reply(msg)
    assert not looks_like_bounce(msg, "Hello.")
    assert parse_bounce(raw) == []


def test_auto_reply_that_mentions_user_unknown_is_still_ignored() -> None:
    raw = message(
        "From: a@example.org\nSubject: Automatic reply: your question\n"
        "Auto-Submitted: auto-replied",
        "Thanks. If you wrote to b@example.org: that address is user unknown now, use me.\n",
    )
    assert parse_bounce(raw) == []


def test_bounce_with_auto_submitted_header_is_parsed() -> None:
    raw = fixture_bytes("exim-user-unknown.eml")
    msg = load(raw)
    assert msg is not None
    assert is_auto_reply(msg)  # Exim marks its bounces auto-replied
    assert looks_like_bounce(msg, "")
    assert [r.klass for r in parse_bounce(raw)] == ["hard"]


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ("From: MAILER-DAEMON@mail.example.com\nSubject: x", ""),
        ("From: Mail Delivery System <postmaster@mail.example.com>\nSubject: x", ""),
        ("From: a@example.org\nSubject: Undeliverable: hi", ""),
        ("From: a@example.org\nSubject: Returned mail: see transcript for details", ""),
        ("From: a@example.org\nSubject: x\nX-Failed-Recipients: b@example.net", ""),
        ("From: no-reply@example.org\nSubject: Mail", "Could not be delivered to: <b@example.net>"),
    ],
)
def test_bounce_signals(headers: str, body: str) -> None:
    msg = load(message(headers, body))
    assert msg is not None
    assert looks_like_bounce(msg, body)
