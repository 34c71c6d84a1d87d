"""Caller headers, tags and metadata (outbox.fields.extra_headers, outbox.fields.labels)."""

from __future__ import annotations

import re

import pytest

from outbox.errors import HeaderInjection, InvalidField, InvalidMessage
from outbox.fields.extra_headers import MAX_HEADERS, check_headers
from outbox.fields.labels import MAX_TAGS, as_text, check_metadata, check_tags
from outbox.telemetry.tracing import label_attributes
from outbox.transports.base import OutgoingMessage, provider_tags


def test_allowed_headers_are_kept_as_given() -> None:
    given = {
        "X-Campaign": " spring-2026 ",
        "x-ticket": "Grüße #42",
        "List-Id": "Shop news <news.shop.example>",
        "References": "<a@x.example> <b@x.example>",
        "In-Reply-To": "<b@x.example>",
        "Keywords": "order, receipt",
        "X-Tab": "a\tb",
    }
    assert check_headers(given) == (
        ("X-Campaign", "spring-2026"),
        ("x-ticket", "Grüße #42"),
        ("List-Id", "Shop news <news.shop.example>"),
        ("References", "<a@x.example> <b@x.example>"),
        ("In-Reply-To", "<b@x.example>"),
        ("Keywords", "order, receipt"),
        ("X-Tab", "a\tb"),
    )
    assert check_headers(None) == ()
    assert check_headers({}) == ()


@pytest.mark.parametrize(
    "name",
    [
        "From", "to", "CC", "Bcc", "Sender", "Reply-To", "Subject", "Date", "Message-ID",
        "MIME-Version", "Content-Type", "Content-Transfer-Encoding", "DKIM-Signature",
        "Return-Path", "Received", "List-Unsubscribe", "List-Unsubscribe-Post",
        "Auto-Submitted", "X-Outbox-Message-ID", "X-", "Precedence", "Resent-To",
    ],
)  # fmt: skip
def test_reserved_and_unknown_headers_are_refused(name: str) -> None:
    with pytest.raises(InvalidField, match="not allowed"):
        check_headers({name: "x"})


@pytest.mark.parametrize(
    ("headers", "error", "says"),
    [
        ({"X-A": "one\r\nBcc: evil@example.org"}, HeaderInjection, "CR, LF"),
        ({"X-A": "one\nX-B: two"}, HeaderInjection, "CR, LF"),
        ({"X-A\r\nBcc": "x"}, HeaderInjection, "CR, LF"),
        ({"X-A": "nul\x00"}, HeaderInjection, "NUL"),
        ({"X-Grüße": "x"}, InvalidField, "ASCII letters"),
        ({"X A": "x"}, InvalidField, "ASCII letters"),
        ({"X-A:": "x"}, InvalidField, "ASCII letters"),
        ({"X-" + "a" * 80: "x"}, InvalidField, "ASCII letters"),
        ({"X-A": "bell\x07"}, InvalidField, "control characters"),
        ({"X-A": "   "}, InvalidField, "empty"),
        ({"X-A": 5}, InvalidField, "string value"),
        ({5: "x"}, InvalidField, "must be a string"),
        ({"X-A": "x" * 901}, InvalidField, "over 900"),
        ({"X-A": "\ud800"}, InvalidField, "invalid Unicode"),
        ({"X-A": "1", "x-a": "2"}, InvalidField, "twice"),
        ({"References": "not-an-id"}, InvalidField, "Message-IDs"),
        ({"In-Reply-To": "<a@b> garbage"}, InvalidField, "Message-IDs"),
        ({"List-Id": "Grüße <l.example>"}, InvalidField, "ASCII"),
        ({f"X-H{i}": "v" for i in range(MAX_HEADERS + 1)}, InvalidField, "over 20"),
        ({f"X-H{i}": "v" * 900 for i in range(10)}, InvalidField, "bytes, over the limit"),
        (["X-A", "x"], InvalidField, "mapping"),
    ],
)
def test_bad_headers_are_refused(headers: object, error: type[Exception], says: str) -> None:
    with pytest.raises(error, match=re.escape(says)):
        check_headers(headers)


def test_tags_are_unique_portable_labels() -> None:
    assert check_tags(["welcome", "onboarding_v2", "welcome", "A-1"]) == (
        "welcome",
        "onboarding_v2",
        "A-1",
    )
    assert check_tags(None) == ()
    assert check_tags(()) == ()


@pytest.mark.parametrize(
    ("tags", "says"),
    [
        ("welcome", "a list"),
        ({"welcome"}, "a list"),
        ([""], "non-empty"),
        ([3], "non-empty string"),
        (["with space"], "ASCII letters"),
        (["grüße"], "ASCII letters"),
        (["a" * 65], "up to 64"),
        ([f"t{i}" for i in range(MAX_TAGS + 1)], "over 10"),
    ],
)
def test_bad_tags_are_refused(tags: object, says: str) -> None:
    with pytest.raises(InvalidField, match=re.escape(says)):
        check_tags(tags)


def test_metadata_is_a_small_flat_object() -> None:
    given = {"order_id": "1001", "total": 12.5, "items": 3, "gift": False}
    assert check_metadata(given) == given
    assert check_metadata(None) == {}
    assert [as_text(v) for v in given.values()] == ["1001", "12.5", "3", "false"]


@pytest.mark.parametrize(
    ("metadata", "says"),
    [
        ([("a", "b")], "a mapping"),
        ({"a b": "x"}, "ASCII letters"),
        ({"k" * 21: "x"}, "up to 20"),
        ({"": "x"}, "up to 20"),
        ({1: "x"}, "up to 20"),
        ({"a": "x" * 81}, "over 80"),
        ({"a": {"nested": 1}}, "string, number or boolean"),
        ({"a": None}, "string, number or boolean"),
        ({"a": float("nan")}, "NaN"),
        ({"a": 2**53}, "too large"),
        ({"a": "line\nbreak"}, "control characters"),
        ({f"k{i}": i for i in range(11)}, "over 10"),
    ],
)
def test_bad_metadata_is_refused(metadata: object, says: str) -> None:
    with pytest.raises(InvalidField, match=re.escape(says)):
        check_metadata(metadata)


def test_invalid_field_is_an_invalid_message() -> None:
    assert issubclass(InvalidField, InvalidMessage)


def test_provider_tags_take_tags_and_the_metadata_that_fits() -> None:
    message = OutgoingMessage(
        "b@x.example", "a@example.org", b"", "<m@x>", "k",
        tags=("welcome", "v2"),
        metadata=(("order_id", "1001"), ("note", "has spaces"), ("welcome", "yes")),
    )  # fmt: skip
    assert provider_tags(message) == [("welcome", "yes"), ("v2", "true"), ("order_id", "1001")]


def test_spans_get_labels_with_addresses_only_as_tags() -> None:
    attributes = label_attributes(
        ["welcome"], {"customer": "alice@example.org", "n": 3, "ok": True}, tag_secret="s" * 32
    )
    assert attributes["outbox.tags"] == ("welcome",)
    assert attributes["outbox.metadata.n"] == "3"
    assert attributes["outbox.metadata.ok"] == "true"
    customer = attributes["outbox.metadata.customer"]
    assert isinstance(customer, str)
    assert "alice" not in customer
    assert customer.endswith("@example.org")
    assert label_attributes([], {}, tag_secret="") == {}
