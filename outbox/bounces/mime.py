"""Tolerant access to the parts of a bounce message (stdlib ``email``, compat32).

Bounces are often malformed (wrong charsets, broken boundaries, 8-bit headers), so
every accessor here swallows decoding errors and returns best-effort text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from email import message_from_bytes
from email.header import decode_header, make_header
from email.message import Message
from email.policy import compat32

_TAG_RE = re.compile(r"<(?:script|style)\b.*?</(?:script|style)\s*>|<[^>]*>", re.S | re.I)
_BLOCK_TAG_RE = re.compile(r"<\s*(?:br|/p|/div|/tr|/li|/h\d|/table)\b[^>]*>", re.I)
_BLANKS_RE = re.compile(r"[ \t\r\f\v]+")

# Content types whose payload is a returned copy of the original message.
RETURNED_TYPES = frozenset({"message/rfc822", "text/rfc822-headers", "message/rfc822-headers"})
DSN_TYPES = frozenset({"message/delivery-status", "message/global-delivery-status"})


def load(raw: bytes) -> Message | None:
    """Parse ``raw`` leniently; ``None`` if even the lenient parser gives up."""
    try:
        return message_from_bytes(raw, policy=compat32)
    except Exception:  # the stdlib parser can fail on pathological input
        return None


def header(msg: Message, name: str) -> str:
    """Decoded, unfolded header value ('' when absent or undecodable)."""
    try:
        value = msg.get(name)
    except Exception:
        return ""
    if value is None:
        return ""
    text = str(value)
    if "=?" in text:
        try:
            text = str(make_header(decode_header(text)))
        except Exception:  # malformed RFC 2047 words: keep the raw text
            text = str(value)
    return " ".join(text.split())


def header_all(msg: Message, name: str) -> list[str]:
    try:
        values = msg.get_all(name) or []
    except Exception:
        return []
    return [" ".join(str(v).split()) for v in values]


def content_type(part: Message) -> str:
    try:
        return part.get_content_type()
    except Exception:
        return "text/plain"


def param(part: Message, name: str) -> str:
    try:
        value = part.get_param(name)
    except Exception:
        return ""
    if isinstance(value, tuple):  # RFC 2231 (charset, language, value)
        value = value[2]
    return str(value or "").strip().lower()


def _decode_bytes(data: bytes, charset: str | None) -> str:
    for candidate in (charset, "utf-8"):
        if not candidate:
            continue
        try:
            return data.decode(candidate)
        except (LookupError, UnicodeDecodeError):
            continue
    return data.decode("latin-1")


def part_text(part: Message) -> str:
    """Decoded text of a non-multipart part, HTML reduced to plain text."""
    try:
        payload = part.get_payload(decode=True)
    except Exception:
        payload = None
    if isinstance(payload, bytes):
        try:
            charset = part.get_content_charset()
        except Exception:
            charset = None
        text = _decode_bytes(payload, charset)
    else:
        raw = part.get_payload()
        text = raw if isinstance(raw, str) else ""
    if content_type(part) == "text/html":
        text = html_to_text(text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def html_to_text(text: str) -> str:
    text = _BLOCK_TAG_RE.sub("\n", text)
    text = _TAG_RE.sub(" ", text)
    text = html.unescape(text)
    return "\n".join(_BLANKS_RE.sub(" ", line).strip() for line in text.split("\n"))


def walk(msg: Message) -> Iterator[Message]:
    """Depth-first parts, not descending into returned messages or DSN blocks."""
    stack = [msg]
    while stack:
        part = stack.pop()
        yield part
        ctype = content_type(part)
        if ctype in RETURNED_TYPES or ctype in DSN_TYPES:
            continue
        payload = part.get_payload()
        if isinstance(payload, list):
            stack.extend(reversed([p for p in payload if isinstance(p, Message)]))


def notification_texts(msg: Message) -> list[str]:
    """Human-readable text parts of the notification itself (not the returned mail).

    Prefers text/plain; an HTML part is used only when no plain part says anything.
    """
    plain: list[str] = []
    rich: list[str] = []
    for part in walk(msg):
        if part.is_multipart():
            continue
        ctype = content_type(part)
        if ctype.startswith("multipart/"):
            # A multipart whose boundary could not be found arrives as one opaque
            # string; its text is still the report.
            plain.append(part_text(part))
        elif ctype == "text/plain" or (ctype.startswith("text/") and ctype != "text/html"):
            if ctype not in RETURNED_TYPES:
                plain.append(part_text(part))
        elif ctype == "text/html":
            rich.append(part_text(part))
    plain = [t for t in plain if t.strip()]
    return plain or [t for t in rich if t.strip()]


def dsn_part_text(part: Message) -> str:
    """Field text of a message/delivery-status part, however the parser split it."""
    payload = part.get_payload()
    if isinstance(payload, list):
        blocks: list[str] = []
        for sub in payload:
            if not isinstance(sub, Message):
                continue
            lines = [f"{key}: {value}" for key, value in sub.items()]
            body = sub.get_payload()
            if isinstance(body, str) and body.strip():
                lines.append(body)
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)
    return part_text(part)


def _has_identity(msg: Message) -> bool:
    return any(msg.get(name) for name in ("Message-ID", "From", "To"))


def returned_headers(msg: Message) -> Message | None:
    """Headers of the returned original message, from message/rfc822 or rfc822-headers."""
    for part in msg.walk():
        ctype = content_type(part)
        if ctype == "message/rfc822":
            payload = part.get_payload()
            if isinstance(payload, list) and payload and isinstance(payload[0], Message):
                inner: Message = payload[0]
                if not _has_identity(inner):
                    # Some MTAs wrap the returned headers as the *body* of the part.
                    body = inner.get_payload()
                    nested = (
                        load(body.lstrip().encode("utf-8", "replace"))
                        if isinstance(body, str)
                        else None
                    )
                    if nested is not None and _has_identity(nested):
                        return nested
                if inner.keys():
                    return inner
        elif ctype in ("text/rfc822-headers", "message/rfc822-headers"):
            text = part_text(part).lstrip()
            inner_msg = load(text.encode("utf-8", "replace"))
            if inner_msg is not None and inner_msg.keys():
                return inner_msg
    return None
