"""Finding and cleaning e-mail addresses in bounce text and DSN fields."""

from __future__ import annotations

import re

# Deliberately permissive (RFC 5322 atext plus quoted local parts): bounces quote
# whatever the sender used, and a miss here loses the recipient entirely.
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = rf"(?:\"[^\"\r\n]{{1,200}}\"|{_ATEXT}(?:\.+{_ATEXT})*\.*)"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z0-9-]{0,62}"
ADDRESS_RE = re.compile(rf"(?<![A-Za-z0-9.+_-]){_LOCAL}@{_DOMAIN}(?![A-Za-z0-9-])")
_ANY_DOMAIN = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?"
_LOOSE_RE = re.compile(rf"{_LOCAL}@{_ANY_DOMAIN}")
_ROUTE_RE = re.compile(r"^(?:@[^:,]+[,:])+")
_TYPE_RE = re.compile(r"^\s*[A-Za-z0-9-]+\s*;\s*")

# Local parts that are mail-system roles rather than people.
_SYSTEM_LOCALS = frozenset(
    {"mailer-daemon", "mailerdaemon", "mail-daemon", "postmaster", "post_master", "mdaemon"}
)


def find_addresses(text: str) -> list[str]:
    """All addresses in ``text``, in order of appearance, duplicates removed."""
    seen: set[str] = set()
    found: list[str] = []
    for match in ADDRESS_RE.finditer(text):
        address = match.group(0).rstrip(".")
        key = address.lower()
        if key not in seen:
            seen.add(key)
            found.append(address)
    return found


def clean_address(value: str | None) -> str | None:
    """Turn a DSN address field or header fragment into a bare address.

    Strips the RFC 3464 address-type prefix (``rfc822;``), angle brackets, a source
    route (``@relay:user@host``) and surrounding noise.  Returns ``None`` when no
    address-like token is present.
    """
    if not value:
        return None
    text = _TYPE_RE.sub("", value.strip())
    match = re.search(r"<([^<>]*@[^<>]*)>", text)
    if match:
        text = match.group(1)
    text = _ROUTE_RE.sub("", text.strip().strip("<>").strip())
    found = ADDRESS_RE.search(text) or _LOOSE_RE.search(text)
    if not found:
        return None
    return found.group(0).rstrip(".")


def is_plausible(address: str | None) -> bool:
    """True for ``local@domain.tld`` with no path, pipe or route syntax."""
    if not address or address.count("@") < 1:
        return False
    local, _, domain = address.rpartition("@")
    if not local or local[0] in "|/" or "." not in domain:
        return False
    return ADDRESS_RE.fullmatch(address) is not None


def is_system_address(address: str) -> bool:
    """True for MAILER-DAEMON/postmaster style role addresses."""
    return address.rpartition("@")[0].lower().strip('"') in _SYSTEM_LOCALS


def same_address(left: str | None, right: str | None) -> bool:
    return bool(left and right and left.lower() == right.lower())
