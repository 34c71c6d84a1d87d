from __future__ import annotations

import ipaddress

from outbox.web.client_address import client_address
from outbox.web.rate_limit import RateLimiter

PROXIES = (ipaddress.ip_network("10.0.0.0/24"),)


def test_the_peer_is_the_client_unless_it_is_a_trusted_proxy() -> None:
    assert client_address("192.0.2.7", "10.0.0.5", PROXIES) == "192.0.2.7"
    assert client_address("192.0.2.7", None, PROXIES) == "192.0.2.7"
    assert client_address(None, "192.0.2.7", PROXIES) == ""


def test_a_trusted_proxy_names_the_client_by_the_entry_it_appended() -> None:
    assert client_address("10.0.0.5", "198.51.100.1", PROXIES) == "198.51.100.1"
    assert client_address("10.0.0.5", "1.2.3.4, 198.51.100.1", PROXIES) == "198.51.100.1"
    assert client_address("10.0.0.5", "2001:db8::1", PROXIES) == "2001:db8::1"
    assert client_address("10.0.0.5", "unknown", PROXIES) == "10.0.0.5"
    assert client_address("10.0.0.5", "198.51.100.1,", PROXIES) == "10.0.0.5"


def test_wait_takes_nothing_and_full_buckets_are_forgotten() -> None:
    limiter = RateLimiter(rate=1.0, burst=2)
    assert limiter.wait("a", 0.0) == 0.0
    assert limiter.wait("a", 0.0) == 0.0  # nothing taken by asking
    limiter.take("a", 0.0)
    limiter.take("a", 0.0)
    assert limiter.wait("a", 0.0) == 1.0
    for n in range(10_001):
        limiter.take(n, 100.0)  # each keeps one of its two: not full
    assert limiter.wait("a", 100.0) == 0.0  # "a" refilled long ago
    assert "a" not in limiter._buckets  # full: forgotten, as a fresh bucket would be
