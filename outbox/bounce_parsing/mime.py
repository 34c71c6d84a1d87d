"""A small, tolerant MIME reader specialised for bounces.

The stdlib feed parser builds a full object tree for every nested returned message,
which costs about a millisecond per bounce; a bounce reader only needs the report's
own parts, the fields of the delivery-status part and the *headers* of the returned
message.  This module splits RFC 2045/2046 structure itself and leans on the stdlib
for the hard parts (RFC 2047 words via :mod:`email.header`, charsets via codecs,
base64 and quoted-printable via :mod:`binascii`).

Bounces are often malformed (wrong charsets, boundaries that never appear, 8-bit
headers), so nothing here raises: every accessor returns best-effort text.
"""

from __future__ import annotations

import binascii
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.header import decode_header, make_header

# Every HTML pattern is linear in its input: a tag is matched up to the next
# ``<`` or ``>`` (never across another ``<``), so no start position rescans the
# text after it; ``<[^>]*>`` on a part of ``<`` characters was quadratic.
_TAG_RE = re.compile(r"<[^<>]*>")
_BLOCK_TAG_RE = re.compile(r"<\s*(?:br|/p|/div|/tr|/li|/h\d|/table)\b[^<>]*>", re.I)
_HIDDEN_OPEN_RE = re.compile(r"<(script|style)\b", re.I)
_HIDDEN_CLOSE_RE = {name: re.compile(rf"</{name}\s*>", re.I) for name in ("script", "style")}
_BLANKS_RE = re.compile(r"[ \t\r\f\v]+")
_PARAM_RE = re.compile(r';\s*([A-Za-z0-9*_.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;\s]*)')
_HEADER_RE = re.compile(r"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$")

# Content types whose payload is a returned copy of the original message.
RETURNED_TYPES = frozenset({"message/rfc822", "text/rfc822-headers", "message/rfc822-headers"})
DSN_TYPES = frozenset({"message/delivery-status", "message/global-delivery-status"})
_MAX_DEPTH = 20
# How much of one part's text is read, and of the notification's text in all.
# A failure report says what it has to say in its first few kilobytes; past
# these a part is an attachment or a quoted original, and reading all of a
# 10 MB body through the phrase patterns would take seconds.
MAX_PART_TEXT = 256 * 1024
MAX_NOTIFICATION_TEXT = 1024 * 1024


@dataclass
class Part:
    """One MIME entity: headers, content type and either a body or child parts.

    ``body`` is the undecoded body as Latin-1 text (a lossless view of the bytes).
    A ``message/rfc822`` part has the returned message as its single child, whose
    own body is left unsplit.
    """

    headers: list[tuple[str, str]] = field(default_factory=list)
    ctype: str = "text/plain"
    params: dict[str, str] = field(default_factory=dict)
    body: str = ""
    children: list[Part] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        key = name.lower()
        for header_name, value in self.headers:
            if header_name == key:
                return value
        return None

    def get_all(self, name: str) -> list[str]:
        key = name.lower()
        return [value for header_name, value in self.headers if header_name == key]

    def is_multipart(self) -> bool:
        return bool(self.children) and self.ctype.startswith("multipart/")


def _split_head(text: str) -> tuple[list[tuple[str, str]], str]:
    """Header fields (unfolded, names lower-cased) and the remaining body."""
    # Each field's lines are gathered and joined once: appending every folded
    # line to the value so far copied it again, quadratic in a long field.
    fields: list[tuple[str, list[str]]] = []
    end = text.find("\n\n")
    head, body = (text, "") if end < 0 else (text[:end], text[end + 2 :])
    if text.startswith("\n"):
        return [], text[1:]
    lines = head.split("\n")
    for index, line in enumerate(lines):
        if line[:1] in (" ", "\t"):
            if fields:
                fields[-1][1].append(line.strip())
            continue
        if line.startswith("From "):  # mbox separator
            continue
        match = _HEADER_RE.match(line)
        if match is None:
            # Not a header: the header block ended without a blank line.
            rest = "\n".join(lines[index:])
            return _unfolded(fields), rest + ("\n\n" + body if end >= 0 else "")
        fields.append((match.group(1).lower(), [match.group(2).strip()]))
    return _unfolded(fields), body


def _unfolded(fields: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    return [(name, " ".join(pieces)) for name, pieces in fields]


def _content_type(headers: list[tuple[str, str]], default: str) -> tuple[str, dict[str, str]]:
    value = next((v for n, v in headers if n == "content-type"), "")
    if not value:
        return default, {}
    main = value.split(";", 1)[0].strip().lower()
    if "/" not in main or " " in main:
        main = default
    params: dict[str, str] = {}
    for match in _PARAM_RE.finditer(value):
        raw = match.group(2)
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = raw[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        params.setdefault(match.group(1).lower().rstrip("*"), raw)
    return main, params


def _split_multipart(body: str, boundary: str) -> list[str] | None:
    """Bodies between ``--boundary`` lines, or ``None`` if the boundary never occurs."""
    delimiter = "--" + boundary
    if delimiter not in body:
        return None
    parts: list[str] = []
    current: list[str] | None = None
    for line in body.split("\n"):
        if line.startswith(delimiter):
            tail = line[len(delimiter) :].rstrip()
            if tail in ("", "--"):
                if current is not None:
                    parts.append("\n".join(current))
                if tail == "--":
                    current = None
                    break
                current = []
                continue
        if current is not None:
            current.append(line)
    if current is not None:
        parts.append("\n".join(current))
    return parts


def _parse(text: str, default: str, depth: int) -> Part:
    headers, body = _split_head(text)
    ctype, params = _content_type(headers, default)
    part = Part(headers=headers, ctype=ctype, params=params, body=body)
    if depth >= _MAX_DEPTH:
        return part
    if ctype.startswith("multipart/") and params.get("boundary"):
        chunks = _split_multipart(body, params["boundary"])
        if chunks is not None:
            child_default = "message/rfc822" if ctype == "multipart/digest" else "text/plain"
            part.children = [_parse(chunk, child_default, depth + 1) for chunk in chunks]
    elif ctype == "message/rfc822":
        inner_headers, inner_body = _split_head(_decode_transfer(part).lstrip("\n"))
        inner_type, inner_params = _content_type(inner_headers, "text/plain")
        part.children = [
            Part(headers=inner_headers, ctype=inner_type, params=inner_params, body=inner_body)
        ]
    return part


def load(raw: bytes) -> Part | None:
    """Parse ``raw`` leniently; ``None`` only for empty input."""
    if not raw or not raw.strip():
        return None
    text = raw.decode("latin-1").replace("\r\n", "\n").replace("\r", "\n")
    return _parse(text, "text/plain", 0)


def _redecode(value: str) -> str:
    """Header text was read as Latin-1; raw 8-bit headers are usually UTF-8."""
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def header(part: Part, name: str) -> str:
    """Decoded, unfolded header value ('' when absent or undecodable)."""
    value = part.get(name)
    if not value:
        return ""
    text = _redecode(value)
    if "=?" in text:
        try:
            text = str(make_header(decode_header(text)))
        except Exception:  # malformed RFC 2047 words: keep the raw text
            text = _redecode(value)
    return " ".join(text.split())


def header_all(part: Part, name: str) -> list[str]:
    return [" ".join(_redecode(v).split()) for v in part.get_all(name)]


def content_type(part: Part) -> str:
    return part.ctype


def param(part: Part, name: str) -> str:
    return part.params.get(name.lower(), "").strip().lower()


def _decode_transfer(part: Part) -> str:
    """Body with its Content-Transfer-Encoding undone, still as Latin-1 text."""
    encoding = (part.get("content-transfer-encoding") or "").strip().lower()
    body = part.body
    if encoding == "base64":
        try:
            return binascii.a2b_base64("".join(body.split()).encode("latin-1")).decode("latin-1")
        except (binascii.Error, ValueError):
            return body
    if encoding == "quoted-printable":
        try:
            return binascii.a2b_qp(body.encode("latin-1")).decode("latin-1")
        except (binascii.Error, ValueError):
            return body
    return body


def _decode_charset(data: bytes, charset: str | None) -> str:
    for candidate in (charset, "utf-8"):
        if not candidate:
            continue
        try:
            return data.decode(candidate)
        except (LookupError, UnicodeDecodeError, ValueError):
            continue
    return data.decode("latin-1")


def part_text(part: Part) -> str:
    """Decoded text of a leaf part (its first ``MAX_PART_TEXT`` characters), HTML
    reduced to plain text."""
    data = _decode_transfer(part).encode("latin-1")
    charset = param(part, "charset") or None
    if charset is None and b"\x1b$" in data:
        charset = "iso-2022-jp"  # JIS text sent without a charset label
    text = _decode_charset(data, charset)[:MAX_PART_TEXT]
    if part.ctype == "text/html":
        text = html_to_text(text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _without_scripts(text: str) -> str:
    """``text`` less its script and style elements, in one pass: each search
    starts where the last one ended; an element never closed is left as text."""
    kept: list[str] = []
    position = 0
    while (opening := _HIDDEN_OPEN_RE.search(text, position)) is not None:
        closing = _HIDDEN_CLOSE_RE[opening.group(1).lower()].search(text, opening.end())
        if closing is None:
            break  # nothing after it closes one either: one scan, not one per tag
        kept += [text[position : opening.start()], " "]
        position = closing.end()
    kept.append(text[position:])
    return "".join(kept)


def html_to_text(text: str) -> str:
    text = _without_scripts(text)
    text = _BLOCK_TAG_RE.sub("\n", text)
    text = _TAG_RE.sub(" ", text)
    text = html.unescape(text).replace("\xa0", " ")
    return "\n".join(_BLANKS_RE.sub(" ", line).strip() for line in text.split("\n"))


def walk(msg: Part) -> Iterator[Part]:
    """Depth-first parts, not descending into returned messages."""
    stack = [msg]
    while stack:
        part = stack.pop()
        yield part
        if part.ctype in RETURNED_TYPES:
            continue
        stack.extend(reversed(part.children))


def notification_texts(msg: Part) -> list[str]:
    """Human-readable text parts of the notification itself (not the returned mail).

    Prefers text/plain; an HTML part is used only when no plain part says anything.
    Parts past the first ``MAX_NOTIFICATION_TEXT`` characters are not read.
    """
    plain: list[str] = []
    rich: list[str] = []
    read = 0
    for part in walk(msg):
        if part.children:
            continue
        if read >= MAX_NOTIFICATION_TEXT:
            break
        read += len(part.body)
        ctype = part.ctype
        if ctype.startswith("multipart/"):
            # A multipart whose boundary could not be found arrives as one opaque
            # body; its text is still the report.
            plain.append(part_text(part))
        elif ctype == "text/html":
            rich.append(part_text(part))
        elif ctype.startswith("text/") and ctype not in RETURNED_TYPES:
            plain.append(part_text(part))
    plain = [t for t in plain if t.strip()]
    return plain or [t for t in rich if t.strip()]


def dsn_part_text(part: Part) -> str:
    """Field text of a message/delivery-status (or feedback-report) part."""
    return part_text(part)


def _has_identity(msg: Part) -> bool:
    return any(msg.get(name) for name in ("Message-ID", "From", "To"))


def parse_headers(text: str) -> Part | None:
    """Header block given as text (text/rfc822-headers, or pasted after a marker)."""
    headers, body = _split_head(text.lstrip("\n"))
    if not headers:
        return None
    ctype, params = _content_type(headers, "text/plain")
    return Part(headers=headers, ctype=ctype, params=params, body=body)


def returned_headers(msg: Part) -> Part | None:
    """Headers of the returned original message, from message/rfc822 or rfc822-headers."""
    for part in walk(msg):
        if part.ctype == "message/rfc822" and part.children:
            inner = part.children[0]
            if not _has_identity(inner) and inner.body:
                # Some MTAs wrap the returned headers as the *body* of the part.
                nested = parse_headers(inner.body)
                if nested is not None and _has_identity(nested):
                    return nested
            if inner.headers:
                return inner
        elif part.ctype in ("text/rfc822-headers", "message/rfc822-headers"):
            found = parse_headers(part_text(part))
            if found is not None:
                return found
    return None
