"""The text part derived from a template's HTML, once per template version (pure).

Converting each rendered message costs milliseconds (inscriptis lays out
MJML's nested tables); converting the compiled template once, with its Jinja
syntax held as opaque words, yields a text *template* that is rendered per
message like ``body.txt``. A param then appears in the text part as written,
never reinterpreted as HTML.

Readable rather than faithful: MJML's layout tables become paragraphs, data
tables one line per row, and every link keeps its target as ``label <url>``
(RFC 3986 appendix C delimiters).
"""

from __future__ import annotations

import re
from typing import Any

import lxml.html  # type: ignore[import-untyped]
from inscriptis import Inscriptis  # type: ignore[import-untyped]
from inscriptis.css_profiles import CSS_PROFILES  # type: ignore[import-untyped]
from inscriptis.model.config import ParserConfig  # type: ignore[import-untyped]

from outbox.message.placeholders import protect

_HIDDEN = (
    "//head|//style|//script|//title"
    "|//*[contains(translate(@style, ' ', ''), 'display:none')]"
    "|//*[contains(translate(@style, ' ', ''), 'mso-hide:all')]"
)
_LAYOUT_ROWS = "//table[@role='presentation']/tr|//table[@role='presentation']/tbody/tr"
_BLANK_LINES = re.compile(r"\n{3,}")


def text_from_html(html: str) -> str:
    """A Jinja text template that reads like ``html`` rendered with the same params."""
    protected = protect(html)
    document = lxml.html.document_fromstring(protected.text)
    for hidden in document.xpath(_HIDDEN):  # MJML's preview line, MSO-only fallbacks
        hidden.drop_tree()
    for anchor in document.xpath("//a[@href]"):
        _show_target(anchor)
    # Each MJML component sits in a row of a layout table: a paragraph of its own.
    for row in document.xpath(_LAYOUT_ROWS):
        row.tag = "p"
    for element in document.iter("table", "thead", "tbody", "tfoot", "tr"):
        element.tag = "div"
    for cell in document.iter("td", "th"):
        cell.tag = "span"
        cell.tail = " " + (cell.tail or "")
    config = ParserConfig(css=CSS_PROFILES["strict"].copy())
    text = Inscriptis(document, config).get_text()
    text = "\n".join(line.rstrip() for line in text.splitlines())
    return protected.restore(_BLANK_LINES.sub("\n\n", text).strip("\n")) + "\n"


def _show_target(anchor: Any) -> None:
    href = anchor.get("href").strip()
    if not href or href.startswith("#"):
        return
    target = href.removeprefix("mailto:")
    label = anchor.text_content().strip()
    if label in {href, target}:
        return
    suffix = lxml.html.Element("span")
    suffix.text = f" <{target}>"
    anchor.append(suffix)
