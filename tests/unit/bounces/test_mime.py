"""The bounce-oriented MIME reader."""

from __future__ import annotations

from outbox.bounce_parsing import mime


def build(*lines: str) -> bytes:
    return "\r\n".join(lines).encode("utf-8")


def test_headers_are_unfolded_and_case_insensitive() -> None:
    msg = mime.load(build("Subject: one", "\ttwo", "X-Thing: a", "x-thing: b", "", "body"))
    assert msg is not None
    assert mime.header(msg, "SUBJECT") == "one two"
    assert mime.header_all(msg, "X-Thing") == ["a", "b"]
    assert mime.header(msg, "Missing") == ""
    assert msg.body == "body"


def test_encoded_words_and_raw_utf8_headers() -> None:
    msg = mime.load("Subject: =?utf-8?q?R=C3=A9ponse?= ok\nX-Raw: caf\u00e9\n\nx".encode())
    assert msg is not None
    assert mime.header(msg, "Subject") == "Réponse ok"
    assert mime.header(msg, "X-Raw") == "café"
    broken = mime.load(b"Subject: =?utf-8?q?unterminated\n\nx")
    assert broken is not None
    assert mime.header(broken, "Subject") == "=?utf-8?q?unterminated"


def test_multipart_tree_and_walk_order() -> None:
    raw = build(
        'Content-Type: multipart/report; report-type=delivery-status; boundary="B"',
        "",
        "preamble",
        "--B",
        "Content-Type: text/plain",
        "",
        "human",
        "--B",
        "Content-Type: message/delivery-status",
        "",
        "Final-Recipient: rfc822; a@example.net",
        "--B",
        "Content-Type: message/rfc822",
        "",
        "Message-ID: <m1@example.com>",
        "To: a@example.net",
        "Content-Type: multipart/mixed; boundary=C",
        "",
        "--C",
        "Content-Type: text/plain",
        "",
        "original body, must not be walked",
        "--C--",
        "--B--",
        "epilogue",
    )
    msg = mime.load(raw)
    assert msg is not None
    assert mime.param(msg, "report-type") == "delivery-status"
    assert [p.ctype for p in mime.walk(msg)] == [
        "multipart/report",
        "text/plain",
        "message/delivery-status",
        "message/rfc822",
    ]
    assert mime.notification_texts(msg) == ["human"]
    returned = mime.returned_headers(msg)
    assert returned is not None
    assert mime.header(returned, "Message-ID") == "<m1@example.com>"


def test_missing_boundary_keeps_the_body_as_text() -> None:
    raw = build('Content-Type: multipart/report; boundary="nope"', "", "--other", "", "report text")
    msg = mime.load(raw)
    assert msg is not None
    assert not msg.is_multipart()
    assert "report text" in mime.notification_texts(msg)[0]


def test_transfer_encodings_and_charsets() -> None:
    raw = build(
        "Content-Type: multipart/mixed; boundary=X",
        "",
        "--X",
        "Content-Type: text/plain; charset=iso-8859-1",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        "caf=E9 =",
        "ok",
        "--X",
        "Content-Type: text/plain; charset=utf-8",
        "Content-Transfer-Encoding: base64",
        "",
        "w6kgYmFzZTY0",
        "--X",
        "Content-Type: text/plain; charset=x-unknown-charset",
        "",
        "plain",
        "--X",
        "Content-Type: text/html",
        "",
        "<p>only&nbsp;html</p>",
        "--X--",
    )
    msg = mime.load(raw)
    assert msg is not None
    assert mime.notification_texts(msg) == ["café ok", "é base64", "plain"]


def test_html_only_notice_is_converted() -> None:
    msg = mime.load(build("Content-Type: text/html", "", "<div>User&nbsp;unknown<br>x</div>"))
    assert msg is not None
    assert mime.notification_texts(msg) == ["User unknown\nx\n"]


def test_html_scripts_and_styles_are_dropped_and_a_stray_angle_bracket_is_text() -> None:
    html = "a<script>x</script>b<STYLE t>y</style >c<p>d</p>e<script>never closed"
    assert mime.html_to_text(html) == "a b c d\ne never closed"
    assert mime.html_to_text("1 < 2 <b>x</b>") == "1 < 2 x"


def test_a_part_is_read_up_to_its_bound() -> None:
    body = "x" * (mime.MAX_PART_TEXT + 10)
    msg = mime.load(build("Content-Type: text/plain", "", body))
    assert msg is not None
    assert len(mime.part_text(msg)) == mime.MAX_PART_TEXT


def test_a_long_folded_header_is_unfolded_whole() -> None:
    msg = mime.load(build("Subject: a", *[f" w{i}" for i in range(1000)], "", "body"))
    assert msg is not None
    assert mime.header(msg, "Subject") == " ".join(["a", *[f"w{i}" for i in range(1000)]])


def test_unlabelled_iso_2022_jp_is_recognised() -> None:
    body = "メール".encode("iso-2022-jp")
    msg = mime.load(b"Content-Type: text/plain\n\n" + body)
    assert msg is not None
    assert mime.part_text(msg) == "メール"


def test_bad_base64_falls_back_to_raw_text() -> None:
    msg = mime.load(build("Content-Transfer-Encoding: base64", "", "not base64 at all!!"))
    assert msg is not None
    assert "not base64" in mime.part_text(msg)


def test_rfc822_headers_wrapped_as_body() -> None:
    raw = build(
        "Content-Type: multipart/mixed; boundary=Y",
        "",
        "--Y",
        "Content-Type: message/rfc822",
        "",
        "Content-Type: text/plain",
        "",
        "Message-ID: <inner@example.com>",
        "To: b@example.net",
        "--Y--",
    )
    msg = mime.load(raw)
    assert msg is not None
    returned = mime.returned_headers(msg)
    assert returned is not None
    assert mime.header(returned, "Message-ID") == "<inner@example.com>"


def test_empty_input() -> None:
    assert mime.load(b"") is None
    assert mime.load(b"  \n ") is None
