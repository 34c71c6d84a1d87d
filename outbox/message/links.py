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

ALLOWED = frozenset({"http", "https", "mailto", "tel", "cid"})
_URL_ATTRIBUTE = re.compile(
    r"""\s(?:href|src|action|formaction|background|poster|xlink:href)\s*=\s*"""
    r"""("[^"]*"|'[^']*'|[^\s>]+)""",
    re.IGNORECASE,
)
_IGNORED = re.compile(r"[\t\n\r]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LEADING = "".join(chr(c) for c in range(0x21))  # C0 controls and space


def disallowed_scheme(rendered: str) -> str | None:
    """The first scheme in a URL attribute of ``rendered`` that is not allowed, or None."""
    for found in _URL_ATTRIBUTE.finditer(rendered):
        url = html.unescape(found.group(1).strip("\"'"))
        scheme = _SCHEME.match(_IGNORED.sub("", url).lstrip(_LEADING))
        if scheme and scheme.group(1).lower() not in ALLOWED:
            return scheme.group(1).lower()
    return None
