"""The DNS questions and the one HTTPS fetch ``outbox domain check`` needs.

Everything goes through one resolver (``--nameserver``, else
``OUTBOX_DNS_RESOLVER``, else the system's), the MTA-STS policy host included:
its address is looked up there, and the TLS connection to it is verified for
the name ``mta-sts.<domain>`` against the system's CAs, or ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import ipaddress

import dns.exception
import dns.rdatatype
import dns.resolver
import httpx

from outbox.domain_auth.findings import Answer
from outbox.domain_auth.mta_sts import PolicyFetch, policy_url
from outbox.pacing.mx import resolver_for

MAX_POLICY_BYTES = 64 * 1024  # RFC 8461 section 3.3 suggests 64 KiB


class DnsLookups:
    """Answers of one run, each name and type asked once."""

    def __init__(self, nameserver: str = "", *, timeout: float = 5.0) -> None:
        self.resolver = resolver_for(nameserver)
        self.resolver.lifetime = timeout
        self.timeout = timeout
        self._answers: dict[tuple[str, str], Answer] = {}

    def txt(self, name: str) -> Answer:
        return self._ask(name, "TXT")

    def mx(self, name: str) -> Answer:
        return self._ask(name, "MX")

    def addresses(self, name: str) -> Answer:
        found = self._ask(name, "A")
        return found if found.records or found.failure else self._ask(name, "AAAA")

    def _ask(self, name: str, kind: str) -> Answer:
        key = (name.lower().rstrip("."), kind)
        if key not in self._answers:
            self._answers[key] = self._resolve(*key)
        return self._answers[key]

    def _resolve(self, name: str, kind: str) -> Answer:
        try:
            answer = self.resolver.resolve(name, kind)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return Answer()
        except dns.exception.DNSException as exc:
            return Answer(failure=type(exc).__name__)
        if kind == "TXT":
            return Answer(tuple(b"".join(r.strings).decode("utf-8", "replace") for r in answer))
        if kind == "MX":
            ordered = sorted(answer, key=lambda r: (r.preference, str(r.exchange)))
            hosts = [str(r.exchange).rstrip(".").lower() or "." for r in ordered]
            return Answer(tuple(hosts))
        return Answer(tuple(r.address for r in answer))

    def policy(self, domain: str) -> PolicyFetch:
        """The MTA-STS policy of ``domain``, fetched over HTTPS without following redirects."""
        host = f"mta-sts.{domain}"
        found = self.addresses(host)
        if found.failure or not found.records:
            return PolicyFetch(failure=f"{host} has no address ({found.failure or 'no A record'})")
        address = found.records[0]
        shown = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
        url = policy_url(domain).replace(f"//{host}/", f"//{shown}/")
        try:
            with (
                httpx.Client(timeout=self.timeout, follow_redirects=False) as client,
                client.stream(
                    "GET", url, headers={"Host": host}, extensions={"sni_hostname": host}
                ) as response,
            ):
                return _read_policy(response)
        except httpx.HTTPError as exc:
            return PolicyFetch(failure=f"https://{host}/ failed: {_reason(exc)}")


def _read_policy(response: httpx.Response) -> PolicyFetch:
    if response.status_code != 200:
        return PolicyFetch(failure=f"HTTP {response.status_code} (it must be 200, no redirect)")
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "text/plain":
        return PolicyFetch(failure=f"Content-Type {kind or '(none)'} (it must be text/plain)")
    body = b""
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_POLICY_BYTES:
            return PolicyFetch(failure=f"over {MAX_POLICY_BYTES} bytes")
    return PolicyFetch(text=body.decode("utf-8", "replace"))


def _reason(exc: httpx.HTTPError) -> str:
    """The first line of what broke (a certificate error names the name it expected)."""
    said = (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {said}"[:200]
