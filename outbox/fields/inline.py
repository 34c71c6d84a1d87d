"""Free-form content: a subject and a text and/or HTML body given at enqueue.

An email without a template carries its own subject and bodies, stored on the
row as given so every attempt sends the same bytes. Without a text part, one
is derived from the HTML here, once, by the same converter templates use
(:mod:`outbox.message.plaintext`): every message has a text part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from outbox.errors import HeaderInjection, InvalidContent, InvalidParams
from outbox.message.plaintext import text_from_html

# The template column of an email with inline content: no template can be named
# so (template names are [a-z0-9][a-z0-9_-]*), so a row can never mean both.
INLINE = "(inline)"
MAX_SUBJECT = 900  # characters: one header, well within RFC 5322's 998 once folded
_BREAKERS = re.compile(r"[\r\n\x00]")
_BLANK_LINES = re.compile(r"\n{3,}")


@dataclass(frozen=True, slots=True)
class Content:
    subject: str
    text: str
    html: str | None

    def hashed(self) -> dict[str, Any]:
        """What the content hash covers: all of it."""
        return {"subject": self.subject, "text": self.text, "html": self.html}


def check_content(subject: object, text: object, html: object, *, max_bytes: int) -> Content:
    """The content as stored, or InvalidContent / HeaderInjection.

    The subject follows the rules of a template's: one line (a line break is
    refused here rather than folded, since nothing but the caller put it
    there), surrounding spaces dropped. ``text`` and ``html`` are strings,
    at least one of them; together with the subject at most ``max_bytes`` of
    UTF-8.
    """
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidContent("an email without a template needs a subject (a non-empty string)")
    if _BREAKERS.search(subject):
        raise HeaderInjection("subject contains CR, LF or NUL")
    subject = subject.strip()
    if not _is_encodable(subject):
        raise InvalidContent("subject contains invalid Unicode (a lone surrogate)")
    if len(subject) > MAX_SUBJECT:
        raise InvalidContent(f"subject is over {MAX_SUBJECT} characters")
    given_text, given_html = _body("text", text), _body("html", html)
    if given_text is None and given_html is None:
        raise InvalidContent("an email without a template needs text or html (or both)")
    size = sum(len(v.encode("utf-8")) for v in (subject, given_text, given_html) if v)
    if size > max_bytes:
        raise InvalidContent(f"content is {size} bytes, over the limit of {max_bytes}")
    body = given_text if given_text is not None else _derived(given_html or "")
    return Content(subject, body, given_html)


def _body(name: str, value: object) -> str | None:
    """A body as given: None or "" is none."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidContent(f"{name} must be a string")
    if "\x00" in value:
        raise InvalidContent(f"{name} contains a NUL character, which Postgres cannot store")
    if not _is_encodable(value):
        raise InvalidContent(f"{name} contains invalid Unicode (a lone surrogate)")
    return value


def check_inline_params(params: object) -> None:
    """Inline content renders no params; they may only name attachments."""
    if isinstance(params, dict) and params.keys() - {"attachments"}:
        extra = ", ".join(sorted(str(k) for k in params.keys() - {"attachments"}))
        raise InvalidParams(
            f"an email without a template takes no params but attachments (got {extra})"
        )


def _derived(html: str) -> str:
    # text_from_html returns a Jinja text template; inline HTML has no Jinja to
    # render, so its "template" is the text itself, braces and all.
    return _BLANK_LINES.sub("\n\n", text_from_html(html)).strip("\n") + "\n"


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
