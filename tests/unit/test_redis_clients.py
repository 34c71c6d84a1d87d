"""Every Redis client of Outbox comes from one factory, and a sentinel URL gives
a client of the master that Sentinel names (built here without connecting)."""

from __future__ import annotations

import re
from pathlib import Path

from redis.connection import SSLConnection
from redis.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

import outbox
from outbox.redis_clients import redis_client

PACKAGE = Path(outbox.__file__).parent
# What makes a Redis client without the factory.
_DIRECT = re.compile(
    r"\bRedis\.from_url\(|\bredis\.Redis\(|\bConnectionPool\.from_url\(|\bSentinel\("
)


def test_no_module_but_the_factory_makes_a_redis_client() -> None:
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "redis_clients.py" and _DIRECT.search(path.read_text())
    ]
    assert offenders == []


def test_a_sentinel_url_gives_a_client_of_the_named_master() -> None:
    client = redis_client(
        "redis+sentinel://app:pw@127.0.0.1:26379,127.0.0.1:26380/cache/2", socket_timeout=3
    )
    try:
        pool = client.connection_pool
        assert isinstance(pool, SentinelConnectionPool)
        assert pool.service_name == "cache"
        assert pool.is_master
        kwargs = pool.connection_kwargs
        assert (kwargs["db"], kwargs["username"], kwargs["password"]) == (2, "app", "pw")
        assert kwargs["socket_timeout"] == 3
        sentinels = pool.sentinel_manager.sentinels
        addresses = [
            (
                s.connection_pool.connection_kwargs["host"],
                s.connection_pool.connection_kwargs["port"],
            )
            for s in sentinels
        ]
        assert addresses == [("127.0.0.1", 26379), ("127.0.0.1", 26380)]
        # Sentinels are asked without the master's password, with the same timeouts.
        for sentinel in sentinels:
            assert sentinel.connection_pool.connection_kwargs.get("password") is None
            assert sentinel.connection_pool.connection_kwargs["socket_timeout"] == 3
    finally:
        client.close()


def test_a_tls_sentinel_url_speaks_tls_to_the_sentinels_and_the_master() -> None:
    client = redis_client(
        "rediss+sentinel://:pw@127.0.0.1:26379/cache?ssl_ca_certs=/etc/ca.pem&ssl_cert_reqs=required"
    )
    try:
        pool = client.connection_pool
        assert pool.connection_class is SentinelManagedSSLConnection
        assert pool.connection_kwargs["ssl_ca_certs"] == "/etc/ca.pem"
        (sentinel,) = pool.sentinel_manager.sentinels
        assert issubclass(sentinel.connection_pool.connection_class, SSLConnection)
        assert sentinel.connection_pool.connection_kwargs["ssl_cert_reqs"] == "required"
    finally:
        client.close()


def test_other_urls_go_to_redis_py_as_they_are() -> None:
    client = redis_client("redis://:pw@127.0.0.1:6390/3", socket_timeout=1)
    try:
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["port"], kwargs["db"], kwargs["password"]) == (6390, 3, "pw")
    finally:
        client.close()
