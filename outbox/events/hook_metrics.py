"""Webhook figures for the ``outbox metrics`` endpoint, read per scrape.

Per endpoint not disabled: ``outbox_webhook_delivered_total`` and
``outbox_webhook_failed_total`` (failed tries, retried or refused), the
deliveries waiting, ``outbox_webhook_lag_seconds`` (how long the oldest
waiting event has waited) and ``outbox_webhook_paused`` (1: past the retry
schedule; the alert OutboxWebhookEndpointPaused).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from outbox.db.store import connections, webhook_rows
from outbox.errors import StoreError

log = logging.getLogger(__name__)


class WebhookCollector(Collector):
    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._conn: connections.Conn | None = None
        self._lock = threading.Lock()

    def figures(self) -> list[webhook_rows.Figures]:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connections.connect(self.database_url, autocommit=True)
                return webhook_rows.endpoint_figures(self._conn)
            except StoreError as exc:
                log.warning("webhook figures not read: %s", exc)
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                return []

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    def collect(self) -> Iterator[Metric]:
        labels = ["endpoint"]
        delivered = CounterMetricFamily(
            "outbox_webhook_delivered", "Events delivered to a webhook endpoint.", labels=labels
        )
        failed = CounterMetricFamily(
            "outbox_webhook_failed",
            "Failed tries of a webhook endpoint (retried, or refused for good).",
            labels=labels,
        )
        waiting = GaugeMetricFamily(
            "outbox_webhook_waiting",
            "Events waiting to be delivered to an endpoint.",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "outbox_webhook_lag_seconds",
            "How long the oldest event waiting for an endpoint has waited (0: none waits).",
            labels=labels,
        )
        paused = GaugeMetricFamily(
            "outbox_webhook_paused",
            "1 when an endpoint is paused after failing past the retry schedule.",
            labels=labels,
        )
        for figures in self.figures():
            name = [str(figures.endpoint_id)]
            delivered.add_metric(name, figures.delivered)
            failed.add_metric(name, figures.failed)
            waiting.add_metric(name, figures.waiting)
            lag.add_metric(name, figures.lag_seconds)
            paused.add_metric(name, 1 if figures.paused else 0)
        yield from (delivered, failed, waiting, lag, paused)
