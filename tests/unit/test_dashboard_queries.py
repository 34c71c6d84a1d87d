"""The dashboards' queries take their scrape jobs from the dashboard's variables."""

from __future__ import annotations

import pytest

from dashboards.build import scoped


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("sum(outbox_sent_total)", 'sum(outbox_sent_total{job=~"$job"})'),
        (
            'max(outbox_oldest_unsent_age_seconds{priority="high"})',
            'max(outbox_oldest_unsent_age_seconds{job=~"$job", priority="high"})',
        ),
        (
            "sum by (priority) (rate(outbox_sent_total[$__rate_interval]))",
            'sum by (priority) (rate(outbox_sent_total{job=~"$job"}[$__rate_interval]))',
        ),
        (
            "sum by (queue_name) (rate(dramatiq_messages_total[5m]))",
            'sum by (queue_name) (rate(dramatiq_messages_total{job=~"$workers_job"}[5m]))',
        ),
        (
            "sum(outbox_bounces_24h) / sum(outbox_sent_24h)",
            'sum(outbox_bounces_24h{job=~"$job"}) / sum(outbox_sent_24h{job=~"$job"})',
        ),
        ("label_values(up, job)", "label_values(up, job)"),  # no outbox metric: untouched
    ],
)
def test_every_selector_gets_the_job_variable(expr: str, expected: str) -> None:
    assert scoped(expr) == expected
