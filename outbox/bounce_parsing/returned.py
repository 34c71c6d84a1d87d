"""The original message a bounce returns: its Message-ID, To and envelope sender.

RFC 3464 section 2 / RFC 6522 put it in a ``message/rfc822`` or
``text/rfc822-headers`` part; text bounces (qmail, Exim, old Sendmail, many
providers) paste it after a line such as "--- Below this line is a copy of the
message."
"""

from __future__ import annotations

import re

from outbox.bounce_parsing import mime
from outbox.bounce_parsing.plain_notices import _MARKERS

_HEADER_START = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,60}:[ \t]*\S", re.M)
_MESSAGE_ID_LINE = re.compile(
    r"^[ \t>]*Message-I[Dd][ \t]*:[ \t]*\n?[ \t]*(<[^<>\s]+>|[^<>\s]+@[^<>\s]+)", re.M | re.I
)


def inline_headers(text: str) -> mime.Part | None:
    """Headers pasted after the original-message marker of a text bounce."""
    marker = _MARKERS.search(text)
    if not marker:
        return None
    rest = text[marker.end() :]
    newline = rest.find("\n")
    rest = rest[newline + 1 :] if newline >= 0 else ""
    start = _HEADER_START.search(rest)
    if not start:
        return None
    return mime.parse_headers(rest[start.start() :])


def normalize_message_id(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip()
    match = re.search(r"<[^<>\s]+>", value)
    if match:
        return match.group(0)
    token = value.split()[0] if value.split() else ""
    if "@" not in token:
        return None
    return f"<{token.strip('<>')}>"


def original_message_id(headers: mime.Part | None, texts: list[str]) -> str | None:
    if headers is not None:
        found = normalize_message_id(mime.header(headers, "Message-ID"))
        if found:
            return found
    for text in texts:
        marker = _MARKERS.search(text)
        tail = text[marker.end() :] if marker else ""
        match = _MESSAGE_ID_LINE.search(tail) or _MESSAGE_ID_LINE.search(text)
        if match:
            return normalize_message_id(match.group(1))
    return None
