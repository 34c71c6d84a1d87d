"""The one way Outbox connects to Redis: the broker, rates and send caps, the relay's
watch, health and maintenance all take their client here.

A ``redis+sentinel://`` URL gives a client of the master Sentinel names
(:func:`redis.sentinel.Sentinel.master_for`): each new connection asks the
sentinels where the master is, and a connection that meets a demoted master
(``READONLY``) or loses its server is dropped, so the next command reaches the
new master without the process restarting. Other URLs go to redis-py as they are.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.sentinel import Sentinel

from outbox.broker_urls import SentinelTarget, is_sentinel_url, parse_sentinel_url


def redis_client(url: str, *, variable: str = "REDIS_URL", **options: Any) -> redis.Redis:
    """A client of the Redis ``url`` names; ``options`` are redis-py's (timeouts, retry).

    A malformed sentinel URL raises :class:`~outbox.errors.ConfigError` naming ``variable``.
    """
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **options)
    return _master_client(parse_sentinel_url(url, variable), options)


def _master_client(target: SentinelTarget, options: dict[str, Any]) -> redis.Redis:
    tls: dict[str, Any] = {"ssl": True, **dict(target.tls_options)} if target.tls else {}
    # Sentinels are asked with the same timeouts and TLS, without the master's password.
    sentinel_options = {k: v for k, v in options.items() if k.startswith("socket_")}
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs={**sentinel_options, **tls})
    client: redis.Redis = sentinel.master_for(
        target.master,
        db=target.db,
        username=target.username,
        password=target.password,
        **tls,
        **options,
    )
    return client
