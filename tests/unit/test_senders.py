"""From and Reply-To checks (outbox.fields.senders): what is stored, what is refused."""

from __future__ import annotations

import email
import email.policy
import re

import pytest

from outbox.errors import HeaderInjection, InvalidAddress, SenderNotAllowed
from outbox.fields.senders import (
    MAX_REPLY_TO,
    check_reply_to,
    check_sender,
    display_name,
    format_mailbox,
    normalize_domains,
)
from outbox.message.build import Envelope, build_message
from tests.unit.test_dkim import DATE

OURS = normalize_domains(["example.com", "Bücher.example", "mail.localhost"])


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("Billing <billing@example.com>", "Billing <billing@example.com>"),
        ("billing@example.com", "billing@example.com"),
        ("<billing@EXAMPLE.com>", "billing@example.com"),
        ("  Billing   <billing@example.com>  ", "Billing <billing@example.com>"),
        ('"Doe, Jane" <jane@example.com>', '"Doe, Jane" <jane@example.com>'),
        ('"Say \\"hi\\"" <hi@example.com>', '"Say \\"hi\\"" <hi@example.com>'),
        ("Grüße vom Team <team@bücher.example>", "Grüße vom Team <team@xn--bcher-kva.example>"),
        ("ops@mail.localhost", "ops@mail.localhost"),
    ],
)
def test_a_sender_is_stored_in_its_header_form(given: str, stored: str) -> None:
    assert check_sender(given, allowed_domains=OURS) == stored


@pytest.mark.parametrize(
    ("given", "error", "says"),
    [
        ("Billing <billing@other.example>", SenderNotAllowed, "not one of OUTBOX_SENDER_DOMAINS"),
        ("billing@sub.example.com", SenderNotAllowed, "sub.example.com"),
        ("Billing <billing@example.com>\r\nBcc: x@evil.example", HeaderInjection, "CR, LF"),
        ("Billing\n <billing@example.com>", HeaderInjection, "CR, LF"),
        ("billing@example.com\x00", HeaderInjection, "NUL"),
        ("a@example.com, b@example.com", InvalidAddress, "one address"),
        ("A <a@example.com> B <b@example.com>", InvalidAddress, "one address"),
        ("<>", InvalidAddress, "local@domain"),
        ("no-at-sign", InvalidAddress, "local@domain"),
        ("jörg@example.com", InvalidAddress, "ASCII local part"),
        ("=?utf-8?q?x?=@example.com", InvalidAddress, "encoded word"),
        ("a@exa_mple.com", InvalidAddress, "not a valid domain"),
        ("Bell\x07 <a@example.com>", InvalidAddress, "control characters"),
        ('Half "quoted <a@example.com>', InvalidAddress, "quotes"),
        ("x" * 201 + " <a@example.com>", InvalidAddress, "over 200"),
        (b"a@example.com", InvalidAddress, "a string"),
        (None, InvalidAddress, "a string"),
    ],
)
def test_bad_senders_are_refused(given: object, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=re.escape(says)):
        check_sender(given, allowed_domains=OURS)


def test_sender_not_allowed_is_an_invalid_address() -> None:
    assert issubclass(SenderNotAllowed, InvalidAddress)


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (None, ()),
        ("help@example.org", ("help@example.org",)),
        ("Help <help@example.org>", ("Help <help@example.org>",)),
        (["a@example.org", "B <b@example.net>"], ("a@example.org", "B <b@example.net>")),
        (("a@example.org", "a@example.org"), ("a@example.org",)),
        ("Ünïcode <x@bücher.example>", ("Ünïcode <x@xn--bcher-kva.example>",)),
    ],
)
def test_reply_to_takes_one_or_more_addresses_anywhere(given: object, stored: tuple[str]) -> None:
    assert check_reply_to(given) == stored


@pytest.mark.parametrize(
    ("given", "error", "says"),
    [
        ([], InvalidAddress, "non-empty list"),
        ({"a@example.org"}, InvalidAddress, "non-empty list"),
        ([f"r{i}@example.org" for i in range(MAX_REPLY_TO + 1)], InvalidAddress, "over 10"),
        (["a@example.org", "b@example.org\r\nX: y"], HeaderInjection, "CR, LF"),
        ("a@example.org, b@example.org", InvalidAddress, "one address"),
        ("jörg@bücher.example", InvalidAddress, "SMTPUTF8"),
        ("someone@localhost", InvalidAddress, "reply_to"),
        ([42], InvalidAddress, "a string"),
    ],
)
def test_bad_reply_to_is_refused(given: object, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=re.escape(says)):
        check_reply_to(given)


def test_sending_domains_are_compared_as_a_labels() -> None:
    assert normalize_domains(["BÜCHER.example.", " shop.example "]) == {
        "xn--bcher-kva.example",
        "shop.example",
    }
    with pytest.raises(InvalidAddress):
        normalize_domains(["localhost"])
    with pytest.raises(InvalidAddress):
        normalize_domains(["exa mple.com"])


@pytest.mark.parametrize(
    ("name", "address"),
    [("", "a@example.com"), ("Plain", "a@example.com"), ('Quo"te, Inc.', "a@example.com")],
)
def test_a_mailbox_keeps_its_display_name(name: str, address: str) -> None:
    assert display_name(format_mailbox(name, address)) == name


@pytest.mark.parametrize(
    "sender",
    ['"Doe, Jane" <jane@example.com>', "Grüße, Team <team@example.com>", "x" * 90 + " <a@b.com>"],
)
def test_from_and_reply_to_headers_read_back_as_given(sender: str) -> None:
    stored = check_sender(sender, allowed_domains=normalize_domains(["example.com", "b.com"]))
    reply_to = check_reply_to(["Ärger, Abteilung <help@example.org>", '"A, B" <ab@example.org>'])
    envelope = Envelope(stored, "alice@example.com", "Hi", "<m@x.example>", DATE, (), reply_to)
    message = email.message_from_bytes(
        build_message(envelope, "text\n", None), policy=email.policy.default
    )
    assert message.defects == []
    (author,) = message["From"].addresses
    assert author.display_name == display_name(stored)
    assert author.addr_spec == stored.rpartition("<")[2].rstrip(">")
    replies = [(a.display_name, a.addr_spec) for a in message["Reply-To"].addresses]
    assert replies == [("Ärger, Abteilung", "help@example.org"), ("A, B", "ab@example.org")]
