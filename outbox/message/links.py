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
_NAMES = ("href", "src", "action", "formaction", "background", "poster", "xlink:href")
_VALUE_SOURCE = r"""\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)"""
_URL_ATTRIBUTE = re.compile(r"\s(?:" + "|".join(_NAMES) + ")" + _VALUE_SOURCE, re.IGNORECASE)
_VALUE = re.compile(_VALUE_SOURCE)
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


def _url_values(rendered: str) -> list[str]:
    """The value of each URL attribute, as written, in the order of the text.

    ASCII text, the common case, is lowered (which moves no character) and
    each attribute name found with ``str.find``, which runs through a whole
    HTML part in a fraction of the time the regular expression's engine takes
    to try its alternatives at every space. What it finds is what the
    expression finds: a name after a space, then ``=`` and a value, read left
    to right, a match never starting inside the one before.
    """
    if not rendered.isascii():
        return [found.group(1) for found in _URL_ATTRIBUTE.finditer(rendered)]
    lowered = rendered.lower()
    found: list[tuple[int, int, int]] = []  # (space before the name, value start, value end)
    for name in _NAMES:
        at = lowered.find(name, 1)
        while at != -1:
            if lowered[at - 1].isspace():
                value = _VALUE.match(lowered, at + len(name))
                if value:
                    found.append((at - 1, value.start(1), value.end(1)))
            at = lowered.find(name, at + 1)
    values, reached = [], 0
    for space, start, end in sorted(found):
        if space >= reached:
            values.append(rendered[start:end])
            reached = end
    return values
