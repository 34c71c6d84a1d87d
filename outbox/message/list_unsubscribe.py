"""One-click unsubscribe links for bulk mail (pure).

Every ``bulk`` message carries ``List-Unsubscribe`` (RFC 2369) with an https
link and, when bounces come back to us, a mailto (whose token is not the
Return-Path's and can only unsubscribe: :func:`outbox.message.return_path.unsubscribe_mailto`); and
``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (RFC 8058), so a
mailbox provider can unsubscribe with one POST, without a page.

The link's token is the outbox row id and an HMAC of it: it names the email,
not the address, so no address travels in a URL (and into proxy or browser
logs); the endpoint looks the recipient up. The token cannot be forged for
another row, and it stops working when the row is deleted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from outbox.errors import ConfigError
from outbox.token_signatures import sign, verify

PURPOSE = "unsubscribe"
ONE_CLICK = "List-Unsubscribe=One-Click"
_TOKEN = re.compile(r"([1-9][0-9]{0,18})-([0-9a-f]{16})")
_URL_CHARS = re.compile(r"[!#$%&'()*+,\-./0-9:;=?@A-Z\[\]_a-z~]+")  # RFC 3986, nothing to escape
_LOOPBACK = {"localhost", "127.0.0.1", "[::1]"}


def token(outbox_id: int, *, secret: str) -> str:
    payload = str(outbox_id)
    return f"{payload}-{sign(secret, PURPOSE, payload)}"


def outbox_id_from_token(value: str, *, secret: str, previous: Sequence[str] = ()) -> int | None:
    """The row a token names, or None when it is malformed or its signature is wrong."""
    match = _TOKEN.fullmatch(value.strip().lower())
    if not match or not verify(secret, PURPOSE, match.group(1), match.group(2), previous):
        return None
    return int(match.group(1))


def link(base_url: str, outbox_id: int, *, secret: str) -> str:
    return f"{base_url}{'&' if '?' in base_url else '?'}token={token(outbox_id, secret=secret)}"


def headers(
    outbox_id: int, *, base_url: str, secret: str, mailto: str | None = None
) -> tuple[tuple[str, str], ...]:
    """``List-Unsubscribe`` (folded between its URIs) and ``List-Unsubscribe-Post``."""
    uris = [f"<{link(base_url, outbox_id, secret=secret)}>"]
    if mailto:
        uris.append(f"<mailto:{mailto}?subject=unsubscribe>")
    return (("List-Unsubscribe", ",\r\n ".join(uris)), ("List-Unsubscribe-Post", ONE_CLICK))


def check_base_url(base_url: str, secret: str) -> None:
    """RFC 8058 section 3.1: an https URI; plain http is accepted for loopback only."""
    parts = urlsplit(base_url)
    loopback = parts.scheme == "http" and parts.netloc.split(":")[0] in _LOOPBACK
    if (parts.scheme != "https" and not loopback) or not parts.netloc:
        raise ConfigError("OUTBOX_UNSUBSCRIBE_URL must be an https:// URL")
    if not _URL_CHARS.fullmatch(base_url) or parts.fragment:
        raise ConfigError("OUTBOX_UNSUBSCRIBE_URL must be a plain URL without a fragment")
    if not secret:
        raise ConfigError("OUTBOX_UNSUBSCRIBE_URL needs OUTBOX_SECRET to sign its tokens")
