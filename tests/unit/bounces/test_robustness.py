"""parse_bounce never raises, whatever it is fed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from outbox.bounce_parsing import BounceResult, parse_bounce

from .conftest import FIXTURES

SAMPLES = sorted(p.read_bytes() for p in FIXTURES.glob("*.eml"))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(raw: bytes) -> None:
    results = parse_bounce(raw)
    assert isinstance(results, list)
    for result in results:
        assert isinstance(result, BounceResult)
        assert result.klass in ("hard", "soft", "complaint", "other")


@SETTINGS
@given(st.binary(max_size=4096))
def test_arbitrary_bytes(raw: bytes) -> None:
    check(raw)


@SETTINGS
@given(st.text(max_size=2048))
def test_arbitrary_text(text: str) -> None:
    check(text.encode("utf-8", "surrogatepass"))


@SETTINGS
@given(
    st.sampled_from(SAMPLES),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=20000), st.binary(min_size=0, max_size=40)),
        max_size=8,
    ),
    st.integers(min_value=0, max_value=20000),
)
def test_mangled_fixtures(raw: bytes, edits: list[tuple[int, bytes]], cut: int) -> None:
    data = bytearray(raw)
    for offset, insert in edits:
        position = min(offset, len(data))
        data[position : position + len(insert)] = insert
    check(bytes(data[: max(cut, 1)]))
    check(bytes(data))


_HEADER_NAMES = st.sampled_from(
    [
        "Content-Type",
        "Content-Transfer-Encoding",
        "From",
        "To",
        "Subject",
        "X-Failed-Recipients",
        "Auto-Submitted",
        "Delivered-To",
        "Final-Recipient",
        "Status",
    ]
)
_CTYPES = st.sampled_from(
    [
        'multipart/report; report-type=delivery-status; boundary="b"',
        "multipart/report; report-type=feedback-report; boundary=b",
        "multipart/mixed; boundary=",
        "multipart/alternative",
        "message/delivery-status",
        "message/rfc822",
        "text/plain; charset=x-unknown",
        "text/html; charset=utf-7",
        "text/rfc822-headers",
    ]
)


@SETTINGS
@given(
    st.lists(st.tuples(_HEADER_NAMES, st.text(max_size=60)), max_size=8),
    _CTYPES,
    st.lists(
        st.tuples(
            _CTYPES,
            st.sampled_from(["7bit", "base64", "quoted-printable", "x-garbage"]),
            st.text(max_size=200),
        ),
        max_size=5,
    ),
    st.booleans(),
)
def test_mangled_mime_structures(
    headers: list[tuple[str, str]],
    top: str,
    parts: list[tuple[str, str, str]],
    close: bool,
) -> None:
    lines = [f"{name}: {value}" for name, value in headers]
    lines += [f"Content-Type: {top}", "", "preamble"]
    for ctype, encoding, body in parts:
        lines += [
            "--b",
            f"Content-Type: {ctype}",
            f"Content-Transfer-Encoding: {encoding}",
            "",
            body,
        ]
    if close:
        lines.append("--b--")
    check("\n".join(lines).encode("utf-8", "surrogatepass"))


def test_deeply_nested_multiparts() -> None:
    depth = 400
    head = "".join(
        f'Content-Type: multipart/mixed; boundary="b{i}"\n\n--b{i}\n' for i in range(depth)
    )
    check(("From: MAILER-DAEMON@example.com\n" + head + "text\n").encode())


def test_huge_single_line() -> None:
    check(
        b"From: MAILER-DAEMON@example.com\nSubject: Undeliverable\n\n" + b"a@example.net " * 50000
    )


def test_empty_and_header_only() -> None:
    assert parse_bounce(b"") == []
    assert parse_bounce(b"\n\n\n") == []
    assert parse_bounce(b"Subject: hi\n") == []
