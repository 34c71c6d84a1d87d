"""The links of a rendered HTML part: none may run a script (pure).

A param that lands in ``href`` (the newsletter's ``url``) is escaped, but
escaping leaves ``javascript:alert(1)`` as it is, and a mail client that
follows it, or a web view of the message, runs it. So every URL attribute
of the HTML part must be http(s), or a scheme that opens no document of its
own (``mailto:``, ``tel:``, ``cid:`` for inline images), or relative.
Read as a browser reads it: tabs and line breaks inside a scheme, leading
spaces and control characters, and character references do not count.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

ALLOWED = frozenset({"http", "https", "mailto", "tel", "cid"})
_URL_ATTRIBUTE_SOURCE = (
    r"""\s(?:href|src|action|formaction|background|poster|xlink:href)\s*=\s*"""
    r"""("[^"]*"|'[^']*'|[^\s>]+)"""
)
_URL_ATTRIBUTE = re.compile(_URL_ATTRIBUTE_SOURCE, re.IGNORECASE)
_URL_ATTRIBUTE_LOWERCASE = re.compile(_URL_ATTRIBUTE_SOURCE)
_IGNORED = re.compile(r"[\t\n\r]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LEADING = "".join(chr(c) for c in range(0x21))  # C0 controls and space


def disallowed_scheme(rendered: str) -> str | None:
    """The first scheme in a URL attribute of ``rendered`` that is not allowed, or None."""
    for value in _url_values(rendered):
        url = html.unescape(value.strip("\"'"))
        scheme = _SCHEME.match(_IGNORED.sub("", url).lstrip(_LEADING))
        if scheme and scheme.group(1).lower() not in ALLOWED:
            return scheme.group(1).lower()
    return None


def _url_values(rendered: str) -> Iterator[str]:
    """The value of each URL attribute, as written.

    ASCII text, the common case, is searched lowered without IGNORECASE, in
    about two thirds of the time on a whole HTML part: lowering ASCII moves no
    character, so each value is cut from the text at the place found.
    """
    if not rendered.isascii():
        return (found.group(1) for found in _URL_ATTRIBUTE.finditer(rendered))
    return (
        rendered[found.start(1) : found.end(1)]
        for found in _URL_ATTRIBUTE_LOWERCASE.finditer(rendered.lower())
    )
