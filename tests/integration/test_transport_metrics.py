"""The exporter's transport figures, read from the shared breaker in Postgres."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from outbox.config import Settings
from outbox.telemetry.metrics_server import OutboxCollector
from tests.integration.helpers import query


def test_a_transport_down_and_one_up(settings: Settings) -> None:
    started = time.monotonic()
    query(
        settings,
        "INSERT INTO outbox_breaker (transport, state, failures, opened_at) VALUES"
        " ('smtp', 'open', 3, now() - interval '90 seconds'), ('postmark', 'closed', 0, NULL)"
        " RETURNING transport",
    )
    collector = OutboxCollector(settings.database_url)
    registry = CollectorRegistry()
    registry.register(collector)
    assert registry.get_sample_value("outbox_transport_up", {"transport": "smtp"}) == 0
    assert registry.get_sample_value("outbox_transport_up", {"transport": "postmark"}) == 1
    down = registry.get_sample_value("outbox_transport_down_seconds", {"transport": "smtp"})
    assert down is not None
    # Opened 90 s before the insert: seconds since then, however long the test took.
    assert 90 - 0.01 <= down <= 90 + (time.monotonic() - started) + 0.01
    assert (
        registry.get_sample_value("outbox_transport_down_seconds", {"transport": "postmark"}) == 0
    )
    collector.close()
