"""Jinja syntax swapped for opaque words and back (pure).

MJML and the HTML-to-text converter parse markup: a ``{{ a < b }}`` or a
quote inside ``href="{{ url ~ "?x" }}"`` would break them, and they may
reflow or escape what they do not understand. Each Jinja expression,
statement and comment is therefore replaced by a word of letters and digits
that survives text, attributes and CSS unchanged, and put back afterwards.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Protected:
    text: str  # the source with every Jinja construct replaced by a word
    originals: tuple[str, ...]  # the constructs, by index
    prefix: str  # word i is f"{prefix}{i}x"

    def word(self, index: int) -> str:
        return f"{self.prefix}{index}x"

    def restore(self, text: str) -> str:
        return re.sub(rf"{self.prefix}(\d+)x", lambda m: self.originals[int(m.group(1))], text)

    def missing(self, text: str) -> list[str]:
        """The constructs whose word does not occur in ``text`` (dropped by a converter)."""
        present = {int(i) for i in re.findall(rf"{self.prefix}(\d+)x", text)}
        return [c for i, c in enumerate(self.originals) if i not in present]


def protect(source: str) -> Protected:
    # A prefix derived from the source, lengthened until the source cannot
    # contain it, so a word is never confused with the author's own text.
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    size = 8
    while f"jx{digest[:size]}n" in source:
        size += 4
    prefix = f"jx{digest[:size]}n"
    originals: list[str] = []

    def replace(match: re.Match[str]) -> str:
        originals.append(match.group(0))
        return f"{prefix}{len(originals) - 1}x"

    text = _JINJA.sub(replace, source)
    return Protected(text, tuple(originals), prefix)
