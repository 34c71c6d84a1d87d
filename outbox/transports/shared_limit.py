"""At most N sends at once through the transport, across every worker process.

A provider's connection cap is per account, and a deployment runs several
worker processes (each with its own per-process limit, :mod:`.limit`). The
slots are leases in a Redis sorted set, scored by when they expire: a send
takes one, gives it back when done, and a crashed worker's lease lapses on
its own after ``lease`` seconds (longer than any attempt can last), so a
kill -9 never leaks a slot for good.

A send that finds no free slot within ``wait`` seconds raises
:class:`~outbox.transports.base.TransportBusy`: nothing was sent, so delivery
puts the row back without counting an attempt. If Redis cannot be asked, sends
go without the cap for a few seconds (a warning says so): holding all mail
back would be worse than a provider's 429, which is retried anyway.
"""

from __future__ import annotations

import logging
import random
import time
import uuid

import redis

from outbox.models import Reply
from outbox.transports.base import OutgoingMessage, Transport, TransportBusy

log = logging.getLogger(__name__)

# KEYS[1]: the leases. ARGV: now (negative: Redis's clock), lease, limit, token.
_ACQUIRE = """
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return 1
"""

_AWAY_SECONDS = 5.0
_POLL = (0.005, 0.02)  # seconds between tries, jittered so waiting workers do not align


class SharedLimited:
    def __init__(
        self,
        transport: Transport,
        client: redis.Redis,
        *,
        key: str,
        limit: int,
        lease: float,
        wait: float = 1.0,
    ) -> None:
        if limit < 1 or lease <= 0:
            raise ValueError("a shared limit needs limit >= 1 and lease > 0")
        self.transport = transport
        self.client = client
        self.key = key
        self.limit = limit
        self.lease = lease
        self.wait = wait
        self._acquire = client.register_script(_ACQUIRE)
        self._away_until = 0.0

    def send(self, message: OutgoingMessage) -> Reply:
        token = self._take()
        try:
            return self.transport.send(message)
        finally:
            if token is not None:
                self._give_back(token)

    def _take(self) -> str | None:
        """A lease token, or None when Redis cannot be asked (no cap for now)."""
        if time.monotonic() < self._away_until:
            return None
        token = uuid.uuid4().hex
        deadline = time.monotonic() + self.wait
        while True:
            try:
                if self._acquire(keys=[self.key], args=[-1, self.lease, self.limit, token]):
                    return token
            except redis.RedisError as exc:
                self._away_until = time.monotonic() + _AWAY_SECONDS
                log.warning("send concurrency is not capped for %gs: %s", _AWAY_SECONDS, exc)
                return None
            if time.monotonic() >= deadline:
                raise TransportBusy(f"{self.limit} sends already in flight", retry_after=1.0)
            time.sleep(random.uniform(*_POLL))

    def _give_back(self, token: str) -> None:
        try:
            self.client.zrem(self.key, token)
        except redis.RedisError as exc:  # the lease lapses by itself
            log.warning("could not give back a send slot (it lapses in %gs): %s", self.lease, exc)

    def close(self) -> None:
        self.transport.close()
