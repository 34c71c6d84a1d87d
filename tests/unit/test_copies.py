"""Cc and bcc recipients (outbox.fields.recipients)."""

from __future__ import annotations

import re

import pytest

from outbox.errors import HeaderInjection, InvalidAddress
from outbox.fields.recipients import MAX_RECIPIENTS, check_copies
from outbox.message.build import Envelope, build_message
from tests.unit.test_dkim import DATE


def test_copies_are_checked_and_kept_once_in_their_first_place() -> None:
    cc, bcc = check_copies(
        "to@example.com",
        ["Boss@Example.ORG", "to@EXAMPLE.com", "audit@bücher.example"],
        ("boss@example.org", "archive@example.net", "archive@example.net"),
    )
    assert cc == ("Boss@example.org", "audit@xn--bcher-kva.example")
    assert bcc == ("archive@example.net",)
    assert check_copies("to@example.com", None, None) == ((), ())
    assert check_copies("to@example.com", "one@example.org", "two@example.org") == (
        ("one@example.org",),
        ("two@example.org",),
    )


@pytest.mark.parametrize(
    ("cc", "bcc", "error", "says"),
    [
        (
            [f"c{i}@example.org" for i in range(MAX_RECIPIENTS)],
            None,
            InvalidAddress,
            "11 recipients",
        ),
        (["a@example.org"] * 5, [f"b{i}@example.org" for i in range(9)], InvalidAddress, "over 10"),
        (["x@example.org\r\nBcc: y@example.org"], None, HeaderInjection, "CR, LF"),
        (None, ["not-an-address"], InvalidAddress, "bcc: "),
        (["jörg@example.org"], None, InvalidAddress, "SMTPUTF8"),
        ({"a@example.org"}, None, InvalidAddress, "a list of addresses"),
        ([5], None, InvalidAddress, "cc: "),
    ],
)
def test_bad_copies_are_refused(cc: object, bcc: object, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=re.escape(says)):
        check_copies("to@example.com", cc, bcc)


def test_ten_recipients_in_all_pass() -> None:
    cc, bcc = check_copies(
        "to@example.com", [f"c{i}@example.org" for i in range(5)], [f"b{i}@x.org" for i in range(4)]
    )
    assert len(cc) + len(bcc) + 1 == MAX_RECIPIENTS


def test_cc_is_a_header_and_bcc_is_not() -> None:
    envelope = Envelope(
        "Shop <s@shop.example>", "to@example.com", "Hi", "<m@x>", DATE, (),
        cc=("a@example.org", "b@example.org"),
    )  # fmt: skip
    head = build_message(envelope, "text\n", None).split(b"\r\n\r\n")[0]
    assert b"Cc: a@example.org,\r\n b@example.org\r\n" in head
    assert b"Bcc" not in head
