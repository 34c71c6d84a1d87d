"""A message as mailing-list software redistributes it.

List managers (Mailman, Sympa, mlmmj, Google Groups) add the RFC 2369 and RFC 2919
header fields, tag the subject and append a footer to a plain-text body.  A bounce
notice that reached a list address arrives at its readers changed this way; the
bounce classifier must read it as it reads the notice itself.
"""

from __future__ import annotations

import re

LIST_ADDRESS = "team@lists.example.com"

_HEADERS = (
    "List-Id: Team discussion <team.lists.example.com>",
    "List-Unsubscribe: <https://lists.example.com/leave/team>,"
    " <mailto:team-leave@lists.example.com>",
    "List-Post: <mailto:team@lists.example.com>",
    "List-Archive: <https://lists.example.com/archive/team/>",
    "Precedence: list",
    "Sender: team-bounces@lists.example.com",
    "Errors-To: team-bounces@lists.example.com",
)
_FOOTER = (
    "_______________________________________________",
    "team mailing list",
    LIST_ADDRESS,
    "https://lists.example.com/listinfo/team",
)
_SUBJECT = re.compile(rb"^(Subject:[ \t]*)", re.I | re.M)
_PLAIN_BODY = re.compile(rb"^Content-Type:[ \t]*text/plain", re.I | re.M)
_ENCODED = re.compile(rb"^Content-Transfer-Encoding:[ \t]*(?:base64|quoted-printable)", re.I | re.M)
_ANY_TYPE = re.compile(rb"^Content-Type:", re.I | re.M)


def via_list(raw: bytes, tag: str = "[team] ") -> bytes:
    """``raw`` with a list's header fields, subject tag and, when the body is
    unencoded plain text, its footer."""
    newline = b"\r\n" if b"\r\n" in raw[:2000] else b"\n"
    end = raw.find(newline * 2)
    head, body = (raw, b"") if end < 0 else (raw[:end], raw[end:])
    head = _SUBJECT.sub(lambda m: m.group(1) + tag.encode(), head, count=1)
    head += b"".join(newline + line.encode() for line in _HEADERS)
    plain = _PLAIN_BODY.search(head) or not _ANY_TYPE.search(head)
    if plain and not _ENCODED.search(head):
        footer = newline.join(line.encode() for line in _FOOTER)
        body = body.rstrip(b"\r\n") + newline * 2 + footer + newline
    return head + body
