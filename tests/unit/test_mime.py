from __future__ import annotations

import datetime as dt
import email
import email.policy
from email.message import EmailMessage

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.mime import Envelope, build_message, encode_header_value

DATE = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def envelope(subject: str = "Your code", sender: str = "Shop <no-reply@shop.example>") -> Envelope:
    return Envelope(sender, "alice@example.com", subject, "<abc123@shop.example>", DATE)


def parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def lines(data: bytes) -> list[bytes]:
    assert data.endswith(b"\r\n")
    return data[:-2].split(b"\r\n")


def test_multipart_alternative_round_trip() -> None:
    text, html = "Hello Alice,\ncode 123\n", "<p>Hello Alice,</p>\n<p>code <b>123</b></p>\n"
    data = build_message(envelope(), text, html)
    message = parse(data)
    assert message.get_content_type() == "multipart/alternative"
    assert message["Message-ID"] == "<abc123@shop.example>"
    assert message["Date"] == "Mon, 30 Nov 2026 12:00:00 +0000"
    assert message["MIME-Version"] == "1.0"
    assert message["To"] == "alice@example.com"
    assert message["From"] == "Shop <no-reply@shop.example>"
    plain, rich = message.iter_parts()
    assert plain.get_content_type() == "text/plain"
    assert rich.get_content_type() == "text/html"
    assert plain.get_content().replace("\r\n", "\n") == text
    assert rich.get_content().replace("\r\n", "\n") == html


def test_text_only() -> None:
    message = parse(build_message(envelope(), "Just text\n", None))
    assert message.get_content_type() == "text/plain"
    assert message.get_content_charset() == "utf-8"


def test_bytes_are_identical_on_every_attempt() -> None:
    assert build_message(envelope(), "a", "<p>b</p>") == build_message(envelope(), "a", "<p>b</p>")


def test_only_crlf_line_endings_and_short_lines() -> None:
    html = "<p>" + "ü" * 3000 + "</p>\r\n" + "x" * 5000 + "\r" + "end"
    text = "line one\rline two\r\n" + "é" * 2000
    data = build_message(envelope(subject="ä" * 200), text, html)
    assert b"\n" not in data.replace(b"\r\n", b"")
    assert b"\r" not in data.replace(b"\r\n", b"")
    assert max(len(line) for line in lines(data)) <= 78
    message = parse(data)
    plain, rich = message.iter_parts()
    assert plain.get_content().replace("\r\n", "\n") == text.replace("\r\n", "\n").replace(
        "\r", "\n"
    )
    assert rich.get_content().replace("\r\n", "\n") == html.replace("\r\n", "\n").replace(
        "\r", "\n"
    )


def test_ascii_with_short_lines_goes_7bit() -> None:
    data = build_message(envelope(), "plain ascii\n", "<p>short</p>\n")
    assert data.count(b"Content-Transfer-Encoding: 7bit") == 2


def test_long_ascii_html_lines_are_encoded() -> None:
    data = build_message(envelope(), "x", "<p>" + "y" * 2000 + "</p>")
    assert b"Content-Transfer-Encoding: base64" in data
    assert max(len(line) for line in lines(data)) <= 78


@pytest.mark.parametrize(
    "subject",
    [
        "Grüße aus Köln",
        "注文が確定しました",
        "a" * 120,
        "Emoji 🎉 party",
        "=?utf-8?q?looks_encoded?=",
    ],
)
def test_subjects_survive(subject: str) -> None:
    message = parse(build_message(envelope(subject=subject), "x", None))
    assert str(message["Subject"]) == subject


def test_non_ascii_display_name() -> None:
    value = encode_header_value("From", "Bücherei Müller <shop@example.com>", address=True)
    assert value.endswith(" <shop@example.com>")
    assert value.isascii()
    message = parse(build_message(envelope(sender="Bücherei Müller <shop@example.com>"), "x", None))
    assert message["From"].addresses[0].display_name == "Bücherei Müller"
    assert message["From"].addresses[0].addr_spec == "shop@example.com"


def test_auto_submitted_and_extra_headers() -> None:
    env = Envelope(
        "s@example.com",
        "a@example.com",
        "x",
        "<id@x>",
        DATE,
        (("Auto-Submitted", "auto-generated"),),
    )
    assert parse(build_message(env, "x", None))["Auto-Submitted"] == "auto-generated"


@given(subject=st.text(max_size=300), text=st.text(max_size=500), html=st.text(max_size=500))
def test_no_value_can_start_a_header(subject: str, text: str, html: str) -> None:
    # Line breaks in a subject are collapsed at render; here the encoder must
    # keep even a raw one from starting a header.
    data = build_message(
        envelope(subject=subject.replace("\r", " ").replace("\n", " ")), text, html
    )
    message = parse(data)
    assert message.defects == []
    names = [name.lower() for name in message]
    assert names.count("subject") == 1
    assert set(names) == {
        "from",
        "to",
        "subject",
        "date",
        "message-id",
        "mime-version",
        "content-type",
    }
