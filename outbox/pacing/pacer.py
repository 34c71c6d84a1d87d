"""Send rates shared by every worker process, kept in Redis.

Each limited key (a receiver such as ``gmail.com``, or the global rate) has
a theoretical arrival time: the earliest moment its next send may go (GCRA,
with a burst of one, so sends are evenly spaced). A send reserves a slot on
all its keys at once, in one Lua script:

- a slot at most ``max_wait`` away is taken: the worker sleeps until then;
- a later one is not taken: the row goes back to Postgres, and for bulk mail
  the script books it a place in the receiver's line of deferred sends, so
  a newsletter's rows come back one interval apart instead of all at once.

Bulk mail waits at most a fraction of a second, so a login code to the same
receiver finds the next slot free within that time: high priority goes first.

A throttling reply halves a key's pace (not more often than once per
``cooldown``); the pace grows back linearly to the configured rate over
``recovery`` seconds. The scripts read Redis's clock, one clock for all hosts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from outbox.config import Settings
from outbox.models import Priority
from outbox.pacing.mx import MxReceivers, resolver_for
from outbox.pacing.rules import RateLimits, domain_of
from outbox.redis_clients import redis_client

log = logging.getLogger(__name__)

_AWAY_SECONDS = 5.0

# Both scripts: the pace factor of a key, grown back since its last cut.
_FACTOR = """
local function factor_of(key, now, recovery)
  local pace = redis.call('HMGET', key, 'factor', 'cut_at')
  if not pace[1] then return 1.0, nil end
  local cut, since = tonumber(pace[1]), now - tonumber(pace[2])
  return math.min(1.0, cut + (1.0 - cut) * math.max(0, since) / recovery), tonumber(pace[2])
end
local function clock(given)
  local now = tonumber(given)
  if now >= 0 then return now end
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function keep(key, value, now)
  redis.call('SET', key, string.format('%.6f', value), 'PX', math.ceil((value - now) * 1000) + 1000)
end
"""

# KEYS: per limited key, its arrival time, booking line and pace (3 each),
# the receiver last.
# ARGV: now (negative: Redis's clock), max_wait, book (1|0), recovery, then
# the configured interval of each key.
_RESERVE = (
    _FACTOR
    + """
local now, max_wait = clock(ARGV[1]), tonumber(ARGV[2])
local book, recovery = ARGV[3] == '1', tonumber(ARGV[4])
local n = #KEYS / 3
local slot, binding, intervals, tats = now, n, {}, {}
for i = 1, n do
  local factor = factor_of(KEYS[3 * i], now, recovery)
  intervals[i] = tonumber(ARGV[4 + i]) / factor
  tats[i] = tonumber(redis.call('GET', KEYS[3 * i - 2]) or 0)
  if tats[i] > slot then slot, binding = tats[i], i end
end
if slot - now <= max_wait then
  -- The deciding key is charged at the slot; the others from now, so one
  -- receiver's wait does not hold up the global rate for everyone else.
  for i = 1, n do
    local from = i == binding and slot or math.max(tats[i], now)
    keep(KEYS[3 * i - 2], from + intervals[i], now)
  end
  return {1, string.format('%.6f', slot - now), binding}
end
if not book then return {0, string.format('%.6f', slot - now), binding} end
local line = KEYS[3 * binding - 1]
local start = math.max(slot, tonumber(redis.call('GET', line) or 0))
keep(line, start + intervals[binding], now)
return {0, string.format('%.6f', start - now), binding}
"""
)

# KEYS[1]: a pace. ARGV: now, floor, recovery, cooldown. Returns the new factor.
_THROTTLE = (
    _FACTOR
    + """
local now, floor = clock(ARGV[1]), tonumber(ARGV[2])
local recovery, cooldown = tonumber(ARGV[3]), tonumber(ARGV[4])
local factor, cut_at = factor_of(KEYS[1], now, recovery)
if cut_at and now - cut_at < cooldown then return string.format('%.6f', factor) end
factor = math.max(floor, factor / 2)
local stamp = string.format('%.6f', now)
redis.call('HSET', KEYS[1], 'factor', string.format('%.6f', factor), 'cut_at', stamp)
redis.call('PEXPIRE', KEYS[1], math.ceil(recovery * 1000) + 1000)
return string.format('%.6f', factor)
"""
)

# KEYS[1]: a pace. ARGV: now, recovery.
_FACTOR_NOW = (
    _FACTOR
    + """
local factor = factor_of(KEYS[1], clock(ARGV[1]), tonumber(ARGV[2]))
return string.format('%.6f', factor)
"""
)


@dataclass(frozen=True, slots=True)
class Slot:
    """The answer for one send."""

    granted: bool  # True: send after ``wait``; False: come back after ``wait``
    wait: float  # seconds
    key: str  # the key that decided: a receiver, or the global rate
    rate: str  # that key's configured rate, for the record


@dataclass(frozen=True, slots=True)
class PaceSettings:
    max_wait_bulk: float = 0.2  # a worker thread waits at most this long for bulk mail
    max_wait_high: float = 2.0
    floor: float = 0.1  # a throttled pace never drops below this share of the rate
    recovery: float = 300.0  # seconds for a throttled pace to grow back to the full rate
    cooldown: float = 5.0  # one cut per this many seconds: a burst of 421s is one signal


class Pacer:
    def __init__(
        self,
        limits: RateLimits,
        client: redis.Redis,
        *,
        namespace: str = "outbox",
        pace: PaceSettings | None = None,
        mx: MxReceivers | None = None,
    ) -> None:
        self.limits = limits
        self.mx = mx
        self.client = client
        self.namespace = namespace
        self.pace = pace or PaceSettings()
        self._reserve = client.register_script(_RESERVE)
        self._throttle = client.register_script(_THROTTLE)
        self._factor = client.register_script(_FACTOR_NOW)
        self._away_until = 0.0

    def _key(self, name: str, part: str) -> str:
        return f"{self.namespace}:pace:{name}:{part}"

    def receiver_of(self, recipient: str) -> str:
        """The receiver a send is paced as: a known group, else (with MX lookups) the
        receiver of the domain's mail exchanger, else the domain itself."""
        receivers, domain = self.limits.receivers, domain_of(recipient)
        if self.mx is None or receivers.knows(domain):
            return receivers.of(recipient)
        return self.mx.receiver(domain)

    def reserve(self, recipient: str, priority: Priority, *, now: float = -1) -> Slot | None:
        """A slot for one send to ``recipient``; None when no limit applies.

        If Redis cannot be asked, the send goes unpaced: a receiver's 4yz is
        retried anyway, while holding every email back would stop all mail.
        """
        limited = self.limits.for_receiver(self.receiver_of(recipient))
        if not limited:
            return None
        keys = [self._key(name, part) for name, _ in limited for part in ("tat", "line", "pace")]
        high = priority == Priority.HIGH
        args: list[Any] = [
            now,
            self.pace.max_wait_high if high else self.pace.max_wait_bulk,
            0 if high else 1,
            self.pace.recovery,
            *(rate.interval for _, rate in limited),
        ]
        if time.monotonic() < self._away_until:
            return None
        try:
            granted, wait, binding = self._reserve(keys=keys, args=args)
        except redis.RedisError as exc:
            # Ask again only after a while: every send would otherwise pay a timeout.
            self._away_until = time.monotonic() + _AWAY_SECONDS
            log.warning("pacing is off for %gs: Redis cannot be reached (%s)", _AWAY_SECONDS, exc)
            return None
        name, rate = limited[int(binding) - 1]
        return Slot(bool(granted), float(wait), name, str(rate))

    def throttled(self, key: str, *, now: float = -1) -> float | None:
        """Halve ``key``'s pace after a throttling reply; the new factor."""
        args = [now, self.pace.floor, self.pace.recovery, self.pace.cooldown]
        try:
            return float(self._throttle(keys=[self._key(key, "pace")], args=args))
        except redis.RedisError as exc:
            log.warning("could not lower the pace of %s: %s", key, exc)
            return None

    def factor(self, key: str, *, now: float = -1) -> float:
        """The share of its configured rate ``key`` runs at now (1.0: full)."""
        args = [now, self.pace.recovery]
        return float(self._factor(keys=[self._key(key, "pace")], args=args))


def pacer_for(settings: Settings) -> Pacer | None:
    """The pacer the settings ask for; None when no rate is configured."""
    limits = settings.rate_limits_parsed()
    if not limits.enabled:
        return None
    pace = PaceSettings(
        max_wait_bulk=settings.pace_wait_bulk,
        max_wait_high=settings.pace_wait_high,
        floor=settings.pace_floor,
        recovery=settings.pace_recovery_seconds,
    )
    # No retries inside redis-py: a pacer that cannot answer at once steps aside.
    client = redis_client(
        settings.redis_url, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)
    )
    mx = None
    if settings.pace_by_mx == "on":
        mx = MxReceivers(resolver_for(settings.dns_resolver))
    return Pacer(limits, client, namespace=settings.namespace, pace=pace, mx=mx)
