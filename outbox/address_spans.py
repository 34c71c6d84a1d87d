"""Where free text holds an email address, read as email-validator reads one (pure).

email-validator accepts a local part of ASCII atext and dots, and, in an
internationalised address, any letter, mark, number, punctuation or symbol
(``हिंदी``, ``o'brien&co``, ``“quoted”``); the domain is letters, marks,
digits and hyphens in labels between dots. Text is read generously: a run
of such characters is taken whole, from its start up to the domain of its
last ``@``, so an address inside a longer word (``key=welcome-bob@x.org``,
``a@b@x.org``) is found with the word, never left partly in clear. What is
found may be more than the address; it is never less.

Text may be HTML: a character reference counts as the character it stands
for, so ``o&#39;brien&amp;co@x.org`` on a page is found whole.

A run whose local part is empty is no address: ``[3f2a9c1e0b7d]@x.org``,
the shape of a recipient tag, is text no address has, and is left alone.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from collections.abc import Iterator

_ASCII_LOCAL = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-/=?^_`{|}~.")
_ASCII_DOMAIN = frozenset(string.ascii_letters + string.digits + "-")
# IDNA's contextual characters, valid inside a label (the Catalan middle dot, …).
_CONTEXTUAL = frozenset("\u00b7\u0375\u05f3\u05f4\u30fb")
_REFERENCE = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def _local_char(c: str) -> bool:
    if c < "\x80":
        return c in _ASCII_LOCAL or c == "@"  # an "@" inside a run: a@b@x.org
    return unicodedata.category(c)[0] in "LMNPS"


def _domain_char(c: str) -> bool:
    if c < "\x80":
        return c in _ASCII_DOMAIN
    return unicodedata.category(c)[0] in "LMN" or c in _CONTEXTUAL


def spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each address in ``text``, left to right, never overlapping."""
    if "&" not in text:
        yield from _plain_spans(text)
        return
    view, origin = _decoded(text)
    for start, end in _plain_spans(view):
        yield origin[start], origin[end]


def _decoded(text: str) -> tuple[str, list[int]]:
    """``text`` with each character reference decoded, and where each character came from."""
    chars: list[str] = []
    origin: list[int] = []
    done = 0
    for reference in _REFERENCE.finditer(text):
        chars += text[done : reference.start()]
        origin += range(done, reference.start())
        char = html.unescape(reference.group())
        if len(char) == 1:
            chars.append(char)
            origin.append(reference.start())
        else:  # not a reference after all: kept as it is
            chars += reference.group()
            origin += range(reference.start(), reference.end())
        done = reference.end()
    chars += text[done:]
    origin += range(done, len(text) + 1)  # and one past the end
    return "".join(chars), origin


def _plain_spans(text: str) -> Iterator[tuple[int, int]]:
    at = text.find("@")
    while at != -1:
        start = at
        while start > 0 and _local_char(text[start - 1]):
            start -= 1
        end = at + 1
        while end < len(text) and _local_char(text[end]):
            end += 1
        found = _address_in_run(text, start, end)
        if found is not None:
            yield found
        at = text.find("@", end)


def _address_in_run(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The run up to the domain of its last ``@`` that has one (None: no address)."""
    at = text.rfind("@", start, end)
    while at > start:
        domain_end = _domain_end(text, at + 1, end)
        if domain_end > at + 1:
            return start, domain_end
        at = text.rfind("@", start, at)
    return None


def _domain_end(text: str, begin: int, end: int) -> int:
    """Where the labels starting at ``begin`` end (``begin``: none); a final dot is not theirs."""
    i = last = begin
    while i < end:
        c = text[i]
        if _domain_char(c):
            i += 1
            last = i
        elif c == "." and i > begin and text[i - 1] != ".":
            i += 1
        else:
            break
    return last
