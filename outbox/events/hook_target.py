"""Where a webhook may be posted, and the address it is posted to.

Only http and https URLs, without credentials, whose host resolves to public
addresses only: a private, loopback, link-local, reserved or multicast one
would let whoever creates an endpoint make this process call into the
network it runs in (server-side request forgery). OUTBOX_WEBHOOK_ALLOW_PRIVATE=1
lifts that for a receiver inside that network. The request then goes to the
address checked, not to a name resolved again (which could answer otherwise).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL = 2000


@dataclass(frozen=True, slots=True)
class Target:
    """A URL with the address its host was found at."""

    url: str  # as given
    scheme: str  # http | https
    address: str  # the checked address the request goes to
    port: int
    path: str  # with its query
    host_header: str  # the host (and port) as given
    sni_hostname: str | None  # https: the name its certificate must carry

    @property
    def request_url(self) -> str:
        """The URL with the address in place of the host."""
        literal = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{literal}:{self.port}{self.path}"


def check_url(url: str) -> str:
    """``url`` if it can be an endpoint, else ValueError saying why."""
    if len(url) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in url):
        raise ValueError(f"an endpoint URL is one line of at most {MAX_URL} characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError("an endpoint URL must be http:// or https://")
    if not parts.hostname:
        raise ValueError("an endpoint URL must name a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("an endpoint URL must not carry credentials (the signature proves us)")
    _ = parts.port  # ValueError on a port out of range
    return url


def shown_url(url: str) -> str:
    """An endpoint's URL without its query (which may carry a token of the receiver's)."""
    parts = urlsplit(url)
    return parts._replace(query="…" if parts.query else "", fragment="").geturl()


def refused_address(address: str) -> str | None:
    """Why a request may not go to ``address``; None when it may."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global or ip.is_multicast:
        return "not a public address"
    return None


def resolve(url: str, *, allow_private: bool) -> Target:
    """The target of ``url``: its host resolved, every address checked; ValueError if refused."""
    parts = urlsplit(check_url(url))
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"the endpoint's host does not resolve ({exc})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not allow_private:
        for address in addresses:
            why = refused_address(address)
            if why:
                raise ValueError(
                    f"the endpoint's host resolves to {why}"
                    " (OUTBOX_WEBHOOK_ALLOW_PRIVATE=1 allows it)"
                )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rpartition("@")[2]
    sni = host if parts.scheme == "https" and not _is_address(host) else None
    return Target(url, parts.scheme, addresses[0], port, path, host_header, sni)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
