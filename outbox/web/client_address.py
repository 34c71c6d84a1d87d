"""Which client a request counts against, for limits kept per client (pure).

The client is the TCP peer. Only when that peer is one of the trusted proxies
(``OUTBOX_CONSOLE_TRUSTED_PROXIES``) does ``X-Forwarded-For`` name it, and
then only by its last entry: the address the proxy itself appended; the ones
before it are whatever the client sent. The answer keys a limit and never
decides trust: who may sign in by the SSO header is decided by the peer alone
(:meth:`outbox.web.console_auth.Access.from_proxy`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

Networks = Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]


def client_address(peer: str | None, forwarded_for: str | None, proxies: Networks) -> str:
    """The peer's address, or the one a trusted proxy forwarded; "" when unknown."""
    if not peer:
        return ""
    if not forwarded_for or not _within(peer, proxies):
        return peer
    named = forwarded_for.rsplit(",", 1)[-1].strip()
    try:
        return str(ipaddress.ip_address(named))
    except ValueError:
        return peer  # the proxy named no address: count against the proxy


def _within(address: str, networks: Networks) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed in network for network in networks)
