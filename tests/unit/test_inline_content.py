"""Inline content (outbox.fields.inline): what an email without a template must carry."""

from __future__ import annotations

import re

import pytest

from outbox.errors import HeaderInjection, InvalidContent, InvalidMessage, InvalidParams
from outbox.fields.inline import (
    INLINE,
    MAX_SUBJECT,
    check_content,
    check_inline_params,
)
from outbox.message.render import _NAME

LIMIT = 10_000


def test_text_only_html_only_and_both() -> None:
    assert check_content("  Hi  ", "Hello\n", None, max_bytes=LIMIT) == (
        check_content("Hi", "Hello\n", "", max_bytes=LIMIT)
    )
    both = check_content("Hi", "Hello", "<p>Hello</p>", max_bytes=LIMIT)
    assert (both.subject, both.text, both.html) == ("Hi", "Hello", "<p>Hello</p>")


def test_without_text_it_is_derived_from_the_html() -> None:
    html = (
        "<html><head><style>p{color:red}</style></head><body>"
        "<h1>Your order</h1><p>Thanks, {{ not a variable }}.</p>"
        '<p><a href="https://shop.example/o/1">See it</a></p>'
        "<table><tr><td>1 x Tea</td><td>4.00</td></tr></table></body></html>"
    )
    content = check_content("Order", None, html, max_bytes=LIMIT)
    assert content.html == html
    text = content.text
    assert "Your order" in text
    assert "Thanks, {{ not a variable }}." in text  # inline HTML is not a template
    assert "See it <https://shop.example/o/1>" in text
    assert "1 x Tea 4.00" in text
    assert "color" not in text
    assert text.endswith("\n")
    assert "\n\n\n" not in text


@pytest.mark.parametrize(
    ("subject", "text", "html", "error", "says"),
    [
        (None, "x", None, InvalidContent, "needs a subject"),
        ("   ", "x", None, InvalidContent, "needs a subject"),
        (5, "x", None, InvalidContent, "needs a subject"),
        ("Hi\r\nBcc: all@example.org", "x", None, HeaderInjection, "CR, LF"),
        ("Hi\n", "x", None, HeaderInjection, "CR, LF"),
        ("Hi\x00", "x", None, HeaderInjection, "NUL"),
        ("x" * (MAX_SUBJECT + 1), "x", None, InvalidContent, f"over {MAX_SUBJECT}"),
        ("Hi\ud800", "x", None, InvalidContent, "invalid Unicode"),
        ("Hi", None, None, InvalidContent, "needs text or html"),
        ("Hi", "", "", InvalidContent, "needs text or html"),
        ("Hi", b"bytes", None, InvalidContent, "text must be a string"),
        ("Hi", None, ["<p>"], InvalidContent, "html must be a string"),
        ("Hi", "a\x00b", None, InvalidContent, "NUL"),
        ("Hi", None, "<p>\ud800</p>", InvalidContent, "invalid Unicode"),
        ("Hi", "é" * 5001, None, InvalidContent, "10004 bytes, over the limit of 10000"),
    ],
)
def test_bad_content_is_refused(
    subject: object, text: object, html: object, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        check_content(subject, text, html, max_bytes=LIMIT)


def test_refusals_are_invalid_messages() -> None:
    assert issubclass(InvalidContent, InvalidMessage)


def test_the_size_counts_subject_text_and_html_together() -> None:
    check_content("S", "t" * 4999, "h" * 5000, max_bytes=LIMIT)
    with pytest.raises(InvalidContent, match="10001 bytes"):
        check_content("Su", "t" * 4999, "h" * 5000, max_bytes=LIMIT)


def test_the_hash_covers_every_part() -> None:
    base = check_content("S", "t", "<p>h</p>", max_bytes=LIMIT)
    assert base.hashed() == {"subject": "S", "text": "t", "html": "<p>h</p>"}


def test_params_may_only_name_attachments() -> None:
    check_inline_params(None)
    check_inline_params({})
    check_inline_params({"attachments": []})
    with pytest.raises(InvalidParams, match="name, order"):
        check_inline_params({"name": "A", "order": 1, "attachments": []})


def test_no_template_can_be_named_like_inline_content() -> None:
    assert _NAME.fullmatch(INLINE) is None
