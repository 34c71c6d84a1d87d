"""VERP token extraction from the bounce's envelope headers and the returned original."""

from __future__ import annotations

import pytest

from outbox.bounce_parsing import parse_bounce, token_from_address
from outbox.bounce_parsing.mime import load
from outbox.bounce_parsing.verp import find_token, token_of

from .conftest import fixture_bytes


@pytest.mark.parametrize(
    ("address", "token"),
    [
        ("bounces+ord-1001@example.com", "ord-1001"),
        ("<bounces+AbC.123=x@example.com>", "AbC.123=x"),
        ("Bounce Handler <BOUNCES+tok@mail.example.com>", "tok"),
        ("bounces@example.com", None),
        ("notbounces+tok@example.com", None),
        ("bounces+@example.com", None),
        ("user+tag@example.com", None),
        ("", None),
    ],
)
def test_token_from_address(address: str, token: str | None) -> None:
    assert token_from_address(address) == token


def test_custom_prefix() -> None:
    assert token_from_address("return+xyz@example.com", prefix="return") == "xyz"
    assert token_from_address("bounces+xyz@example.com", prefix="return") is None


def test_find_token_takes_the_first_match() -> None:
    assert (
        find_token(
            ["someone@example.org", "bounces+first@example.com", "bounces+second@example.com"]
        )
        == "first"
    )


def test_delivered_to_wins_over_to() -> None:
    raw = (
        b"Delivered-To: bounces+from-envelope@example.com\n"
        b"To: bounces+from-header@example.com\n"
        b"From: MAILER-DAEMON@mail.example.net\nSubject: x\n\nbody\n"
    )
    msg = load(raw)
    assert msg is not None
    assert token_of(msg, None) == "from-envelope"


def test_token_from_returned_return_path_when_bounce_went_elsewhere() -> None:
    bounce = load(b"To: postmaster@example.com\nFrom: MAILER-DAEMON@mail.example.net\n\nx\n")
    returned = load(b"Return-Path: <bounces+kept-in-copy@example.com>\nTo: a@example.net\n\nx\n")
    assert bounce is not None
    assert returned is not None
    assert token_of(bounce, returned) == "kept-in-copy"
    assert token_of(bounce, None) is None


def test_parse_bounce_reports_the_token() -> None:
    (result,) = parse_bounce(fixture_bytes("exim-user-unknown.eml"))
    assert result.verp_token == "ord-3001"
    (complaint,) = parse_bounce(fixture_bytes("arf-abuse.eml"))
    assert complaint.verp_token == "ord-9101"


def test_token_from_to_header_and_from_ses_source() -> None:
    (result,) = parse_bounce(fixture_bytes("verizon-vtext.eml"))
    assert result.verp_token == "ord-8605"
    (ses,) = parse_bounce(fixture_bytes("ses-sns-bounce.eml"))
    assert ses.verp_token == "ord-8002"


def test_no_token_without_a_verp_address() -> None:
    (result,) = parse_bounce(fixture_bytes("unsubscribe-request.eml"))
    assert result.verp_token is None
