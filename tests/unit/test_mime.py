from __future__ import annotations

import datetime as dt
import email
import email.policy
import hashlib
import re
from email.header import decode_header, make_header
from email.message import EmailMessage

import pytest
from hypothesis import given
from hypothesis import strategies as st

from outbox.message import list_unsubscribe as unsubscribe
from outbox.message.build import (
    Attachment,
    Envelope,
    build_message,
    encode_header_value,
    encoded_words,
)

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


def test_attachments_wrap_the_alternative_in_mixed() -> None:
    pdf = b"%PDF-1.4\n" + bytes(range(256)) * 40
    data = build_message(
        envelope(),
        "Your invoice\n",
        "<p>Your invoice</p>\n",
        [Attachment("Invoice-1234.pdf", "application/pdf", pdf)],
    )
    message = parse(data)
    assert message.defects == []
    assert message.get_content_type() == "multipart/mixed"
    alternative, attached = message.iter_parts()
    assert alternative.get_content_type() == "multipart/alternative"
    assert [p.get_content_type() for p in alternative.iter_parts()] == ["text/plain", "text/html"]
    assert attached.get_content_type() == "application/pdf"
    assert attached.get_content_disposition() == "attachment"
    assert attached.get_filename() == "Invoice-1234.pdf"
    assert attached["Content-Transfer-Encoding"] == "base64"
    assert attached.get_content() == pdf
    assert max(len(line) for line in lines(data)) <= 78
    assert data == build_message(
        envelope(),
        "Your invoice\n",
        "<p>Your invoice</p>\n",
        [Attachment("Invoice-1234.pdf", "application/pdf", pdf)],
    )


def test_text_only_with_an_attachment() -> None:
    message = parse(
        build_message(envelope(), "x\n", None, [Attachment("a.txt", "text/plain", b"a")])
    )
    plain, attached = message.iter_parts()
    assert plain.get_content_type() == "text/plain"
    assert attached.get_filename() == "a.txt"


@pytest.mark.parametrize(
    "filename",
    ["Rechnung für März 2026.pdf", 'quote " and \\ backslash.pdf', "ü" * 120 + ".pdf"],
)
def test_attachment_filenames_are_rfc_2231_encoded(filename: str) -> None:
    data = build_message(envelope(), "x", None, [Attachment(filename, "application/pdf", b"x")])
    assert data.isascii()
    assert max(len(line) for line in lines(data)) <= 78
    _, attached = parse(data).iter_parts()
    assert attached.get_filename() == filename
    assert attached.get_param("name") == filename


def test_a_param_cannot_forge_a_boundary() -> None:
    env = envelope()
    digest = hashlib.sha256(env.message_id.encode()).hexdigest()
    # A caller who knows the key can compute the boundary: a text part with it
    # must not close the part and open one of its own.
    forged = f"hi\n--=_{digest[:30]}\nContent-Type: text/html\n\n<script>x</script>\n"
    message = parse(build_message(env, forged, "<p>hi</p>"))
    parts = list(message.iter_parts())
    assert [p.get_content_type() for p in parts] == ["text/plain", "text/html"]
    assert parts[0]["Content-Transfer-Encoding"] == "quoted-printable"
    assert parts[0].get_content().replace("\r\n", "\n") == forged
    assert parts[1].get_content() == "<p>hi</p>"


def test_list_unsubscribe_headers_stay_folded_and_parse() -> None:
    env = Envelope(
        "s@example.com",
        "a@example.com",
        "x",
        "<id@x>",
        DATE,
        unsubscribe.headers(
            12345,
            base_url="https://mail.shop.example/unsubscribe",
            secret="k",
            mailto="bounces+9ix-0123456789abcdef@bounces.shop.example",
        ),
    )
    data = build_message(env, "x\n", None)
    # A URL is never folded (receivers would have to strip the whitespace): its
    # line may pass 78 characters, never RFC 5322's 998.
    for line in lines(data):
        assert len(line) <= 78 or re.fullmatch(rb"(List-Unsubscribe:)? <[^ ]+>,?", line), line
    message = parse(data)
    value = str(message["List-Unsubscribe"])
    token = unsubscribe.token(12345, secret="k")
    assert value == (
        f"<https://mail.shop.example/unsubscribe?token={token}>, "
        "<mailto:bounces+9ix-0123456789abcdef@bounces.shop.example?subject=unsubscribe>"
    )
    assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


@given(st.text(min_size=1, max_size=300).filter(lambda t: t.strip() == t and "\r" not in t))
def test_encoded_words_read_back_and_keep_lines_short(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return  # params and fields never hold a lone surrogate (checked at enqueue)
    encoded = encoded_words(text)
    assert all(len("Reply-To: " + line) <= 78 for line in encoded.split("\r\n"))
    assert str(make_header(decode_header(encoded))) == text
