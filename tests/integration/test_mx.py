"""Pacing by mail exchanger, against a DNS server on loopback."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.models import Priority
from outbox.pacing.mx import MxReceivers, resolver_for
from outbox.pacing.pacer import pacer_for
from tests.integration.dns_server import DnsServer

RECORDS = {
    "acme.example": [(10, "aspmx.l.google.com"), (20, "alt1.aspmx.l.google.com")],
    "contoso.example": [(0, "contoso-example.mail.protection.outlook.com")],
    "shop.example": [(10, "mx2.hoster.example"), (5, "mx1.hoster.example")],
    "blog.example": [(10, "mx1.hoster.example")],
    "nullmx.example": [(0, ".")],
}


def test_domains_are_paced_as_their_mail_exchangers_receiver() -> None:
    with DnsServer(RECORDS) as server:
        mx = MxReceivers(resolver_for(server.address))
        assert mx.receiver("acme.example") == "gmail.com"
        assert mx.receiver("contoso.example") == "outlook.com"
        assert mx.receiver("shop.example") == "hoster.example"  # the preferred MX
        assert mx.receiver("blog.example") == "hoster.example"  # the same hoster: one receiver
        assert mx.receiver("nullmx.example") == "nullmx.example"  # RFC 7505: accepts no mail
        assert mx.receiver("unknown.example") == "unknown.example"  # NXDOMAIN
        for domain in ("acme.example", "unknown.example"):
            mx.receiver(domain)  # answered from the cache
        assert sorted(server.queries) == sorted([*RECORDS, "unknown.example"])


def test_an_unreachable_resolver_paces_the_domain_as_itself() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    mx = MxReceivers(resolver_for(f"127.0.0.1:{port}"), timeout=0.3)
    assert mx.receiver("acme.example") == "acme.example"


def test_a_workspace_domain_shares_gmails_rate(settings: Settings) -> None:
    with DnsServer(RECORDS) as server:
        paced = dataclasses.replace(
            settings,
            rate_limits="gmail.com=10/s",
            pace_by_mx="on",
            dns_resolver=server.address,
            pace_wait_bulk=0.05,
        )
        pacer = pacer_for(paced)
        assert pacer is not None
        now = 2_000_000.0
        first = pacer.reserve("ceo@acme.example", Priority.BULK, now=now)
        second = pacer.reserve("x@gmail.com", Priority.BULK, now=now)
        assert first is not None
        assert first.granted
        assert second is not None
        assert second.key == "gmail.com"
        assert not second.granted  # acme.example's send used gmail.com's slot
        assert pacer.reserve("x@shop.example", Priority.BULK, now=now) is None  # no * rate
        known = len(server.queries)
        pacer.reserve("y@googlemail.com", Priority.BULK, now=now)
        assert len(server.queries) == known  # built-in groups need no lookup


def test_mx_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="OUTBOX_PACE_BY_MX"):
        Settings.from_env({"OUTBOX_PACE_BY_MX": "yes"})
