"""A template's files to the Jinja sources rendered per message (pure).

``body.mjml`` is compiled to HTML by mjml-python (MRML) with its Jinja syntax
held as opaque words (:mod:`outbox.message.placeholders`), so MJML can neither break
on nor rewrite an expression; ``body.html`` is taken as it is. The text part
is ``body.txt`` when given, else derived from that HTML
(:mod:`outbox.message.plaintext`). This runs once per template version: per message
only Jinja substitution runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version

import mjml

from outbox.errors import TemplateError
from outbox.message import layouts
from outbox.message.placeholders import protect
from outbox.message.plaintext import text_from_html

SUBJECT, MJML, HTML, TEXT, META = (
    "subject.txt",
    "body.mjml",
    "body.html",
    "body.txt",
    "template.toml",
)
SOURCE_FILES = (SUBJECT, MJML, HTML, TEXT, META)
# Bumped whenever this module's output for the same files changes.
_FORMAT = 1  # layouts resolve to the same output for files without them


@dataclass(frozen=True, slots=True)
class Compiled:
    html: str | None  # Jinja source of the HTML part
    text: str  # Jinja source of the text part
    text_derived: bool  # True when ``text`` came from the HTML, not from body.txt


def compile_files(files: Mapping[str, str]) -> Compiled:
    """Raises TemplateError with what is wrong; the caller adds the template's name."""
    if MJML in files and HTML in files:
        raise TemplateError(f"has both {MJML} and {HTML}: keep one")
    if MJML in files:
        html: str | None = compile_mjml(layouts.resolve(files[MJML], files, label=MJML))
    else:
        html = layouts.resolve(files[HTML], files, label=HTML) if HTML in files else None
    if TEXT in files:
        return Compiled(html, layouts.resolve(files[TEXT], files, label=TEXT), text_derived=False)
    if html is None:
        raise TemplateError(f"has no {TEXT}, {MJML} or {HTML}")
    return Compiled(html, text_from_html(html), text_derived=True)


def compile_mjml(source: str) -> str:
    """MJML to HTML, every Jinja expression, statement and comment kept verbatim."""
    protected = protect(source)
    try:
        # No web fonts: a message must not load anything from a third party.
        html = mjml.mjml2html(protected.text, fonts={})
    except (ValueError, RuntimeError) as exc:
        raise TemplateError(f"{MJML}: {exc}") from None
    dropped = protected.missing(html)
    if dropped:
        raise TemplateError(
            f"{MJML}: MJML dropped {dropped[0]!r}; put Jinja statements between "
            "components inside <mj-raw>"
        )
    return protected.restore(html)


@cache
def compiler_identity() -> str:
    """What else besides the files decides the output; part of every template version."""
    return (
        f"outbox-{_FORMAT} mjml-python-{version('mjml-python')} inscriptis-{version('inscriptis')}"
    )
