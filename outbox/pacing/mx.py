"""Receivers found through DNS: the mail exchanger a domain's MX record names.

Google Workspace and Microsoft 365 take the mail of millions of domains that
look nothing like gmail.com; their limits are the provider's. With
``OUTBOX_PACE_BY_MX=on`` a domain outside the built-in groups is paced as the
receiver its preferred MX host belongs to (:func:`outbox.pacing.rules.receiver_of_mx`).
Answers are cached per process for their TTL (at most an hour); a domain DNS
cannot answer for is paced as itself, and asked about again after a minute.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict

import dns.exception
import dns.resolver

from outbox.pacing.rules import receiver_of_mx

log = logging.getLogger(__name__)

_MAX_TTL = 3600.0
_FAILED_TTL = 60.0


class MxReceivers:
    def __init__(
        self,
        resolver: dns.resolver.Resolver | None = None,
        *,
        timeout: float = 2.0,
        size: int = 10_000,
    ) -> None:
        self.resolver = resolver or dns.resolver.Resolver()
        self.resolver.lifetime = timeout
        self.size = size
        self._cache: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def receiver(self, domain: str) -> str:
        """The receiver of ``domain``'s mail: its MX host's, else the domain itself."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(domain)
            if cached is not None and cached[1] > now:
                self._cache.move_to_end(domain)
                return cached[0]
        receiver, ttl = self._lookup(domain)
        with self._lock:
            self._cache[domain] = (receiver, now + ttl)
            self._cache.move_to_end(domain)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return receiver

    def _lookup(self, domain: str) -> tuple[str, float]:
        try:
            answer = self.resolver.resolve(domain, "MX")
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return domain, _MAX_TTL  # no MX: mail goes to the domain's own host
        except dns.exception.DNSException as exc:
            log.info("MX lookup for %s failed (%s): paced as itself for now", domain, exc)
            return domain, _FAILED_TTL
        preferred = min(answer, key=lambda record: record.preference)
        host = str(preferred.exchange)
        ttl = min(float(answer.rrset.ttl) if answer.rrset else _MAX_TTL, _MAX_TTL)
        return receiver_of_mx(host) if host != "." else domain, max(ttl, 1.0)


def resolver_for(address: str) -> dns.resolver.Resolver:
    """The system's resolver, or the one at ``host[:port]`` (``OUTBOX_DNS_RESOLVER``)."""
    if not address:
        return dns.resolver.Resolver()
    host, _, port = address.rpartition(":") if address.count(":") == 1 else (address, "", "")
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.port = int(port) if port else 53
    return resolver
