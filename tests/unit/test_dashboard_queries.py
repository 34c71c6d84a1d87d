"""The dashboards' queries take their deployment and scrape jobs from the dashboard's variables."""

from __future__ import annotations

import pytest

from dashboards.build import scoped

JOB = 'deployment=~"$deployment", job=~"$job"'
WORKERS = 'deployment=~"$deployment", job=~"$workers_job"'


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("sum(outbox_sent_total)", f"sum(outbox_sent_total{{{JOB}}})"),
        (
            'max(outbox_oldest_unsent_age_seconds{priority="high"})',
            f'max(outbox_oldest_unsent_age_seconds{{{JOB}, priority="high"}})',
        ),
        (
            "sum by (priority) (rate(outbox_sent_total[$__rate_interval]))",
            f"sum by (priority) (rate(outbox_sent_total{{{JOB}}}[$__rate_interval]))",
        ),
        (
            "sum by (queue_name) (rate(dramatiq_messages_total[5m]))",
            f"sum by (queue_name) (rate(dramatiq_messages_total{{{WORKERS}}}[5m]))",
        ),
        (
            "sum(outbox_bounces_24h) / sum(outbox_sent_24h)",
            f"sum(outbox_bounces_24h{{{JOB}}}) / sum(outbox_sent_24h{{{JOB}}})",
        ),
        ("label_values(up, job)", "label_values(up, job)"),  # no outbox metric: untouched
    ],
)
def test_every_selector_gets_the_job_variable(expr: str, expected: str) -> None:
    assert scoped(expr) == expected
