"""Headers a caller adds to one email: an allow-list, each value one safe line.

Allowed are ``X-*`` headers and the few standard ones an application has a
reason to set (threading, list identity, keywords). Everything Outbox sets
itself or that decides where mail goes or who it is from (From, To, Cc,
Bcc, Sender, Reply-To, Subject, Date, Message-ID, MIME and DKIM headers,
List-Unsubscribe, Return-Path, Received...) is refused, whatever its case:
a second From or a Bcc added through ``headers`` would defeat every other
check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from outbox.errors import HeaderInjection, InvalidField

MAX_HEADERS = 20
MAX_VALUE = 900  # characters: one header line stays within RFC 5322's 998 once folded
MAX_TOTAL = 8 * 1024  # bytes of names and values together
STANDARD = frozenset(
    {
        "list-id",
        "list-archive",
        "list-help",
        "list-owner",
        "list-post",
        "list-subscribe",
        "references",
        "in-reply-to",
        "keywords",
        "comments",
    }
)
# X- headers that carry meaning for receivers or for Outbox itself.
RESERVED_X = frozenset({"x-outbox-message-id", "x-mailer-recipient", "x-original-to"})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,75}")
_ID = r"<[\x21-\x3b\x3d\x3f-\x7e]+@[\x21-\x3b\x3d\x3f-\x7e]+>"  # <left@right>, no < > inside
_MESSAGE_IDS = re.compile(rf"{_ID}(?:[ \t]+{_ID})*")
_BREAKERS = re.compile(r"[\r\n\x00]")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a tab is folding whitespace


def check_headers(headers: object) -> tuple[tuple[str, str], ...]:
    """The headers as stored (name as given, value stripped), or InvalidField / HeaderInjection."""
    if headers is None:
        return ()
    if not isinstance(headers, Mapping):
        raise InvalidField("headers must be a mapping of header name to value")
    if len(headers) > MAX_HEADERS:
        raise InvalidField(f"headers has {len(headers)} entries, over {MAX_HEADERS}")
    checked: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in headers.items():
        checked_name = _name(name)
        if checked_name.lower() in seen:
            raise InvalidField(f"header {checked_name!r} is given twice (in another case)")
        seen.add(checked_name.lower())
        checked.append((checked_name, _value(checked_name, value)))
    total = sum(len(n) + len(v.encode("utf-8")) for n, v in checked)
    if total > MAX_TOTAL:
        raise InvalidField(f"headers are {total} bytes, over the limit of {MAX_TOTAL}")
    return tuple(checked)


def _name(name: object) -> str:
    if not isinstance(name, str):
        raise InvalidField("a header name must be a string")
    if _BREAKERS.search(name):
        raise HeaderInjection("a header name contains CR, LF or NUL")
    if not _NAME.fullmatch(name):
        raise InvalidField(
            f"header name {name[:40]!r} is not ASCII letters, digits and hyphens (at most 76)"
        )
    lower = name.lower()
    if lower in STANDARD:
        return name
    if lower.startswith("x-") and len(lower) > 2 and lower not in RESERVED_X:
        return name
    raise InvalidField(
        f"header {name!r} is not allowed: only X-* headers and "
        + ", ".join(sorted(STANDARD))
        + " (From, To, Reply-To and the others have their own arguments or are set by Outbox)"
    )


def _value(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidField(f"header {name!r} must have a string value")
    if _BREAKERS.search(value):
        raise HeaderInjection(f"header {name!r} contains CR, LF or NUL")
    if _CONTROL.search(value):
        raise InvalidField(f"header {name!r} contains control characters")
    value = value.strip()
    if not value:
        raise InvalidField(f"header {name!r} is empty")
    if len(value) > MAX_VALUE:
        raise InvalidField(f"header {name!r} is over {MAX_VALUE} characters")
    if not _is_encodable(value):
        raise InvalidField(f"header {name!r} contains invalid Unicode (a lone surrogate)")
    lower = name.lower()
    if lower.startswith("list-") and not value.isascii():
        # Structured (a <list id> or <urls>): an encoded word would break the structure.
        raise InvalidField(f"header {name!r} must be ASCII")
    if lower in {"references", "in-reply-to"} and not _MESSAGE_IDS.fullmatch(value):
        raise InvalidField(f"header {name!r} must be Message-IDs as <id@domain>, space-separated")
    return value


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
