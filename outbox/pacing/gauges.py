"""Pacing figures for the ``outbox metrics`` endpoint, read from Redis per scrape.

``outbox_pace_factor{receiver}`` is the share of its configured rate a
receiver is paced at now: 1 normally, less after it answered with throttling
replies (the adaptive back-off of :mod:`outbox.pacing.pacer`). Receivers throttled
under the ``*`` rate appear once they have been throttled.
"""

from __future__ import annotations

from collections.abc import Iterator

import redis
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from outbox.pacing.pacer import Pacer
from outbox.pacing.rules import GLOBAL


class PaceCollector(Collector):
    def __init__(self, pacer: Pacer) -> None:
        self.pacer = pacer

    def receivers(self) -> set[str]:
        limits = self.pacer.limits
        names = set(limits.per_receiver) | ({GLOBAL} if limits.total else set())
        prefix, suffix = f"{self.pacer.namespace}:pace:", ":pace"
        for key in self.pacer.client.scan_iter(match=f"{prefix}*{suffix}", count=500):
            text = key.decode() if isinstance(key, bytes) else str(key)
            names.add(text[len(prefix) : -len(suffix)])
        return names

    def collect(self) -> Iterator[Metric]:
        factor = GaugeMetricFamily(
            "outbox_pace_factor",
            "Share of its configured rate a receiver is sent at now (below 1: throttled).",
            labels=["receiver"],
        )
        limit = GaugeMetricFamily(
            "outbox_pace_limit_per_second",
            "Configured sends per second per receiver (OUTBOX_RATE_LIMITS, OUTBOX_SEND_RATE).",
            labels=["receiver"],
        )
        try:
            for name in sorted(self.receivers()):
                factor.add_metric([name], self.pacer.factor(name))
        except redis.RedisError:
            return  # the database figures are still served; these are absent
        limits = self.pacer.limits
        for name, rate in limits.per_receiver.items():
            limit.add_metric([name], rate.count / rate.seconds)
        if limits.total is not None:
            limit.add_metric([GLOBAL], limits.total.count / limits.total.seconds)
        yield factor
        yield limit
