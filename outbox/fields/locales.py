"""A recipient's language, as a BCP 47 tag (``de``, ``de-AT``, ``pt-BR``, ``zh-Hant-TW``)."""

from __future__ import annotations

import re

from outbox.errors import InvalidMessage

_TAG = re.compile(r"[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8}){0,3}")


def check_locale(value: object) -> str | None:
    """The tag in its canonical case (language lower, region upper, script title), or
    InvalidMessage."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 35 or not _TAG.fullmatch(value):
        raise InvalidMessage(
            f"locale must be a language tag such as 'de' or 'de-AT', not {value!r}"
        )
    language, *rest = value.replace("_", "-").split("-")
    parts = [language.lower()]
    for part in rest:
        if len(part) == 2 and part.isalpha():
            parts.append(part.upper())  # region
        elif len(part) == 4 and part.isalpha():
            parts.append(part.title())  # script
        else:
            parts.append(part.lower())
    return "-".join(parts)


def fallbacks(locale: str) -> list[str]:
    """``de-AT`` → ``["de-AT", "de"]``: the tags to try, most specific first."""
    parts = locale.split("-")
    return ["-".join(parts[:n]) for n in range(len(parts), 0, -1)]
