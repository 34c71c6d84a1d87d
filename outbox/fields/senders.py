"""From and Reply-To: one mailbox each, as they will appear in the header.

A mailbox is ``Display Name <local@domain>`` or a bare address. The address
is checked like a recipient (``outbox.validate.normalize_address``) and kept
in its ASCII form, the domain as an IDNA A-label: a header with a UTF-8
address needs SMTPUTF8 from every hop, which a From or Reply-To cannot
count on. The display name may be any single line of Unicode; it is RFC 2047
encoded when the message is built.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import idna

from outbox.errors import HeaderInjection, InvalidAddress, SenderNotAllowed
from outbox.validate import ascii_address, normalize_address

MAX_REPLY_TO = 10
MAX_DISPLAY_NAME = 200
_BREAKERS = re.compile(r"[\r\n\x00]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_MAILBOX = re.compile(r"\s*(?:(?P<name>[^<>]*?)\s*<(?P<angle>[^<>]*)>|(?P<bare>[^<>\s]+))\s*")
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_ASCII_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")
_ENCODED_WORD = re.compile(r"=\?[^?]*\?[bBqQ]\?[^?]*\?=")
_SPECIALS = re.compile(r'[()<>\[\]:;@\\,."]')


def check_sender(value: object, *, allowed_domains: Collection[str]) -> str:
    """The From mailbox as stored, or InvalidAddress / SenderNotAllowed.

    ``allowed_domains`` are the domains this installation signs for (ASCII,
    lower case, see :func:`normalize_domains`): a From elsewhere would fail
    DMARC at the receiver, so it is refused here rather than bounced there.
    """
    name, address = _mailbox("sender", value, own=True)
    domain = address.rpartition("@")[2]
    if domain not in allowed_domains:
        raise SenderNotAllowed(
            f"sender domain {domain!r} is not one of OUTBOX_SENDER_DOMAINS "
            f"({', '.join(sorted(allowed_domains))})"
        )
    return format_mailbox(name, address)


def check_reply_to(value: object) -> tuple[str, ...]:
    """Reply-To mailboxes as stored: one string, or a list or tuple of them."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise InvalidAddress("reply_to must be an address or a non-empty list of addresses")
    if len(items) > MAX_REPLY_TO:
        raise InvalidAddress(f"reply_to has {len(items)} addresses, over {MAX_REPLY_TO}")
    mailboxes = [format_mailbox(*_mailbox("reply_to", item)) for item in items]
    return tuple(dict.fromkeys(mailboxes))  # the same address twice is one


def normalize_domains(domains: Collection[str]) -> frozenset[str]:
    """Sending domains in the form :func:`check_sender` compares: ASCII, lower case."""
    return frozenset(ascii_domain(domain) for domain in domains)


def ascii_domain(domain: str) -> str:
    """``domain`` as an IDNA A-label in lower case (UTS 46 mapping), or InvalidAddress.

    Sending domains are the installation's own: a special-use name such as
    ``mail.localhost`` is allowed here, unlike for recipients.
    """
    try:
        encoded = idna.encode(domain.strip().rstrip("."), uts46=True).decode("ascii").lower()
    except (idna.IDNAError, UnicodeError):
        raise InvalidAddress(f"{domain!r} is not a valid domain") from None
    labels = encoded.split(".")
    if len(labels) < 2 or len(encoded) > 253 or not all(map(_LABEL.fullmatch, labels)):
        raise InvalidAddress(f"{domain!r} is not a valid domain")
    return encoded


def format_mailbox(name: str, address: str) -> str:
    """``name <address>``, the name quoted when it holds RFC 5322 specials."""
    if not name:
        return address
    if _SPECIALS.search(name):
        escaped = name.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}" <{address}>'
    return f"{name} <{address}>"


def display_name(mailbox: str) -> str:
    """The display name of a stored mailbox, unquoted ("" for a bare address)."""
    name, angle, _ = mailbox.rpartition("<")
    if not angle:
        return ""
    return _strip_quotes(name.strip())


def _mailbox(field: str, value: object, *, own: bool = False) -> tuple[str, str]:
    if not isinstance(value, str):
        raise InvalidAddress(f"{field} must be a string")
    if _BREAKERS.search(value):
        raise HeaderInjection(f"{field} contains CR, LF or NUL")
    match = _MAILBOX.fullmatch(value)
    if match is None:
        raise InvalidAddress(f"{field} must be one address, as Name <local@domain> or local@domain")
    name = _unquote(match["name"] or "")
    if _CONTROL.search(name):
        raise InvalidAddress(f"{field}'s display name contains control characters")
    if len(name) > MAX_DISPLAY_NAME:
        raise InvalidAddress(f"{field}'s display name is over {MAX_DISPLAY_NAME} characters")
    raw = (match["angle"] if match["angle"] is not None else match["bare"]).strip()
    if own:
        return name, _own_address(field, raw)
    try:
        address = normalize_address(raw)
    except InvalidAddress as exc:
        raise type(exc)(f"{field}: {exc}") from None
    ascii_form = address if address.isascii() else ascii_address(address)
    if ascii_form is None:
        raise InvalidAddress(
            f"{field}'s local part is not ASCII: it would need SMTPUTF8 from every receiver"
        )
    local, _, domain = ascii_form.rpartition("@")
    return name, f"{local}@{domain.lower()}"


def _own_address(field: str, address: str) -> str:
    """An address at one of our domains: ASCII dot-atom local part, IDNA domain."""
    local, at, domain = address.rpartition("@")
    if not at or len(local) > 64 or not _ASCII_LOCAL.fullmatch(local):
        raise InvalidAddress(
            f"{field} must be local@domain with an ASCII local part of at most 64 characters"
        )
    if _ENCODED_WORD.search(local):
        raise InvalidAddress(f"{field}'s local part is an RFC 2047 encoded word")
    return f"{local}@{ascii_domain(domain)}"


def _unquote(name: str) -> str:
    name = name.strip()
    unquoted = _strip_quotes(name)
    if unquoted is name and '"' in name:
        raise InvalidAddress("a display name's quotes must enclose all of it")
    return unquoted


def _strip_quotes(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return re.sub(r"\\(.)", r"\1", name[1:-1])
    return name
