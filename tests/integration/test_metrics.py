"""The exporter against the database after a scripted run with retries and failures."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from outbox.telemetry.metrics import PRIORITIES, REPLY_CLASSES, STATUSES
from tests.conftest import REDIS_URL
from tests.integration.helpers import query, wait_until
from tests.integration.metrics_run import Run, fresh_settings, scrape, scripted_run
from tests.integration.prometheus import free_port

# The tests read one scripted run of the Procfile's processes.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(
    database_url: str, redis_client: redis.Redis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    namespace = f"outbox-test-{uuid.uuid4().hex[:8]}"
    settings = fresh_settings(database_url, REDIS_URL, namespace)
    with scripted_run(settings, tmp_path_factory.mktemp("metrics")) as done:
        yield done
    for key in redis_client.scan_iter(f"{namespace}*"):
        redis_client.delete(key)


def settled(run: Run) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The exporter's samples once it has seen the last bounce."""
    bounced = query(run.settings, "SELECT count(*) FROM email_outbox WHERE bounced_at IS NOT NULL")
    want = float(bounced[0][0])

    def caught_up() -> bool:
        samples = scrape(run.metrics_url)
        return sum(v for (n, _), v in samples.items() if n == "outbox_bounces_24h") == want

    wait_until(caught_up, timeout=10, interval=0.2)
    return scrape(run.metrics_url)


def test_status_counts_match_the_database(run: Run) -> None:
    samples = settled(run)
    in_db = {
        (s, p): n
        for s, p, n in query(
            run.settings, "SELECT status, priority, count(*) FROM email_outbox GROUP BY 1, 2"
        )
    }
    for status in STATUSES:
        for priority in PRIORITIES:
            labels = (("priority", priority), ("status", status))
            assert samples[("outbox_emails", labels)] == in_db.get((status, priority), 0), labels
    assert in_db[("sent", "bulk")] == 32
    assert in_db[("dead", "bulk")] == 3
    assert in_db[("failed", "bulk")] == 2
    assert in_db[("suppressed", "bulk")] == 1


def test_counters_match_the_database(run: Run) -> None:
    samples = settled(run)
    for status in ("sent", "failed", "dead"):
        rows = dict(
            query(
                run.settings,
                "SELECT priority, count(*) FROM email_outbox WHERE status = %s GROUP BY 1",
                status,
            )
        )
        for priority in PRIORITIES:
            value = samples[(f"outbox_{status}_total", (("priority", priority),))]
            assert value == rows.get(priority, 0), (status, priority)
    enqueued = dict(query(run.settings, "SELECT priority, count(*) FROM email_outbox GROUP BY 1"))
    for priority in PRIORITIES:
        assert samples[("outbox_enqueued_total", (("priority", priority),))] == enqueued[priority]


def test_retries_by_reply_class(run: Run) -> None:
    samples = settled(run)
    retries = {
        (p, c): samples[("outbox_retries_total", (("priority", p), ("reply_class", c)))]
        for p in PRIORITIES
        for c in REPLY_CLASSES
    }
    # flaky9 once (421); flaky1, flaky2 once and grey1, grey2 twice (4yz); silent1 twice.
    assert retries[("high", "4xx")] == 1
    assert retries[("bulk", "4xx")] == 6
    assert retries[("bulk", "uncertain")] == 2
    in_db = query(
        run.settings, "SELECT count(*) FROM email_attempt WHERE verdict IN ('retry', 'uncertain')"
    )
    assert sum(retries.values()) == in_db[0][0]


def test_histograms_count_every_send_and_attempt(run: Run) -> None:
    samples = settled(run)
    for priority in PRIORITIES:
        labels = (("priority", priority),)
        sent = query(
            run.settings,
            "SELECT count(*), coalesce(sum(extract(epoch FROM sent_at - created_at)), 0)::float8"
            " FROM email_outbox WHERE status = 'sent' AND priority = %s",
            priority,
        )[0]
        assert samples[("outbox_enqueue_to_sent_seconds_count", labels)] == sent[0]
        assert samples[("outbox_enqueue_to_sent_seconds_sum", labels)] == pytest.approx(sent[1])
        inf = (("le", "+Inf"), *labels)
        assert samples[("outbox_enqueue_to_sent_seconds_bucket", inf)] == sent[0]
        attempts = query(
            run.settings,
            "SELECT count(*) FROM email_attempt a JOIN email_outbox o ON o.id = a.outbox_id"
            " WHERE o.priority = %s AND a.duration_ms IS NOT NULL",
            priority,
        )[0][0]
        assert samples[("outbox_send_duration_seconds_count", labels)] == attempts


def test_gauges_match_the_database(run: Run) -> None:
    samples = settled(run)
    sent = query(run.settings, "SELECT count(*) FROM email_outbox WHERE sent_at IS NOT NULL")[0][0]
    assert sent == 35
    assert samples[("outbox_sent_24h", ())] == sent
    assert samples[("outbox_bounce_rate_24h", ())] == pytest.approx(2 / 35)
    assert samples[("outbox_complaint_rate_24h", ())] == pytest.approx(1 / 35)
    suppressed = query(run.settings, "SELECT count(*) FROM email_suppression")[0][0]
    # 2 hard bounces and a complaint, and the 2 addresses refused with 5.1.1 at RCPT TO.
    assert samples[("outbox_suppressed_addresses", ())] == suppressed == 5
    for priority in PRIORITIES:
        assert samples[("outbox_oldest_unsent_age_seconds", (("priority", priority),))] == 0
        assert samples[("outbox_oldest_due_age_seconds", (("priority", priority),))] == 0
    # A relay published during the run: no longer ago than the run began.
    assert 0 <= samples[("outbox_relay_last_publish_age_seconds", ())] <= time.time() - run.started
    assert samples[("outbox_exporter_up", ())] == 1
    reports = {
        dict(labels)["outcome"]: value
        for (name, labels), value in samples.items()
        if name == "outbox_bounce_reports_24h" and dict(labels)["source"] == "mail"
    }
    assert reports == {"verp": 3}  # two DSNs and a complaint, linked by their VERP tokens


def test_a_fresh_exporter_counts_the_same(run: Run, tmp_path: Path) -> None:
    """Started after the run: the one full count at start agrees with the increments."""
    before = settled(run)
    port = free_port()
    env = {**run.settings.to_env(), "PORT": str(port)}
    with (tmp_path / "metrics.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "outbox.cli", "metrics"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_until(lambda: _answers(url), timeout=30, interval=0.2)
        after = scrape(url)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    for key, value in before.items():
        if key[0] in ("outbox_emails", "outbox_sent_24h", "outbox_bounce_rate_24h"):
            assert after[key] == value, key
    # Counters start with the process, as Prometheus expects of a counter.
    assert after[("outbox_sent_total", (("priority", "bulk"),))] == 0


def _answers(url: str) -> bool:
    try:
        scrape(url)
    except OSError:
        return False
    return True
