"""The Grafana dashboards: generated JSON is committed as built, and every panel's
query returns data from a real Prometheus scraping a scripted run."""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from dashboards.build import DASHBOARDS, HERE, render
from outbox.telemetry.metrics import LATENCY_BUCKETS
from tests.conftest import REDIS_URL
from tests.integration.helpers import wait_until
from tests.integration.metrics_run import Ports, Run, fresh_settings, scripted_run
from tests.integration.prometheus import Prometheus, prometheus
from tests.unit.test_alert_rules import RULES

# What Grafana substitutes; scrapes come every second here.
GRAFANA_VARIABLES = {
    "$__rate_interval": "10s",
    "$__range": "5m",
    "$__interval": "1s",
    "$workers_job": "outbox-workers",
    "$job": "outbox",
    "$deployment": "outbox",
}


@dataclass
class Observed:
    run: Run
    prom: Prometheus
    end: float


def panel_queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, PromQL) of every panel target."""
    found = []
    for name in DASHBOARDS:
        board = json.loads((HERE / name).read_text())
        panels = list(board["panels"])
        panels += [p for row in board["panels"] for p in row.get("panels", [])]
        for panel in panels:
            for target in panel.get("targets", []):
                found.append((name, panel["title"], target["expr"]))
    return found


def expand(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


@pytest.fixture(scope="module")
def observed(
    database_url: str, redis_client: redis.Redis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Observed]:
    tmp_path = tmp_path_factory.mktemp("dashboards")
    namespace = f"outbox-test-{uuid.uuid4().hex[:8]}"
    settings = fresh_settings(database_url, REDIS_URL, namespace)
    ports = Ports.free()
    targets = {
        "outbox": [f"127.0.0.1:{ports.metrics}"],
        "outbox-workers": [f"127.0.0.1:{ports.high}", f"127.0.0.1:{ports.bulk}"],
    }
    # Prometheus first, as in production: it sees the counters start at 0. It
    # scrapes only some seconds after it is ready (target updates are throttled).
    with prometheus(tmp_path, targets) as prom:
        wait_until(lambda: bool(prom.query('up{job="outbox"}')), timeout=30)
        with scripted_run(settings, tmp_path, ports) as run:
            wait_until(lambda: prom.scraped("outbox") and prom.scraped("outbox-workers"), 30)
            wait_until(lambda: _value(prom, "sum(outbox_bounces_24h)") == 3, timeout=30)
            time.sleep(2)  # a few samples more
            yield Observed(run, prom, time.time())
    for key in redis_client.scan_iter(f"{namespace}*"):
        redis_client.delete(key)


def _value(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr)
    return float(result[0]["value"][1]) if result else None


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_committed_json_is_what_the_code_builds(name: str) -> None:
    committed = (HERE / name).read_text()
    assert committed == render(DASHBOARDS[name]), f"run `python dashboards/build.py` ({name})"


def test_every_panel_has_a_query() -> None:
    assert len(panel_queries()) >= 30
    assert {Path(n).name for n, _, _ in panel_queries()} == set(DASHBOARDS)


def test_panels_take_the_datasource_and_jobs_from_variables() -> None:
    for name in DASHBOARDS:
        board = json.loads((HERE / name).read_text())
        assert {v["name"] for v in board["templating"]["list"]} == {
            "datasource", "deployment", "job", "workers_job"
        }  # fmt: skip
        panels = [p for p in board["panels"] if p.get("type") != "row"]
        assert {p["datasource"]["uid"] for p in panels} == {"${datasource}"}, name
    for name, title, expr in panel_queries():
        selectors = re.findall(r"\b(?:outbox|dramatiq)_[a-z0-9_]+(\{[^}]*\})?", expr)
        assert all('job=~"$' in s for s in selectors), (name, title, expr)
        assert all('deployment=~"$deployment"' in s for s in selectors), (name, title, expr)
        # A counter is read through increase() or rate(): it restarts with its process.
        for counter in re.findall(r"\b\w+_total\b", expr):
            assert re.search(rf"(?:increase|rate)\({counter}\b", expr), (name, title, expr)


@pytest.mark.prometheus
def test_every_panel_query_returns_data(observed: Observed) -> None:
    empty = [
        (name, title, expr)
        for name, title, expr in panel_queries()
        if not _numbers(observed.prom.query_range(expand(expr), observed.run.started, observed.end))
    ]
    assert not empty, empty


def _numbers(result: list[dict[str, Any]]) -> list[float]:
    """The sample values that are numbers (a quantile of no traffic is NaN)."""
    values = [float(v) for series in result for _, v in series["values"]]
    return [v for v in values if not math.isnan(v)]


@pytest.mark.prometheus
def test_panels_show_the_run(observed: Observed) -> None:
    prom = observed.prom
    assert prom.value("sum(outbox_sent_total)") == 35
    assert prom.value("sum(outbox_failed_total)") == 2
    assert prom.value("sum(outbox_dead_total)") == 3
    assert prom.value("sum(outbox_retries_total)") == 9
    by_class = {
        r["metric"]["reply_class"]: float(r["value"][1])
        for r in prom.query("sum by (reply_class) (outbox_retries_total)")
    }
    assert by_class == {"4xx": 7, "uncertain": 2, "connection": 0, "timeout": 0, "other": 0}
    assert prom.value('sum(outbox_emails{status=~"failed|dead|held"})') == 5
    assert prom.value('sum(outbox_emails{status=~"pending|queued|sending"})') == 0
    assert prom.value("max(outbox_bounce_rate_24h)") == pytest.approx(2 / 35)
    assert prom.value("max(outbox_complaint_rate_24h)") == pytest.approx(1 / 35)
    high = prom.query(
        "histogram_quantile(0.5, sum by (le) "
        '(outbox_enqueue_to_sent_seconds_bucket{priority="high"}))'
    )
    # Login codes went out during the run: the median lies in a bucket no higher
    # than the one that holds the run's whole length.
    run_bucket = min(b for b in LATENCY_BUCKETS if b >= observed.end - observed.run.started)
    assert 0 < float(high[0]["value"][1]) <= run_bucket
    assert prom.value('sum(dramatiq_messages_total{queue_name="email_high"})') >= 3


@pytest.mark.prometheus
def test_alerts_fire_for_what_the_run_did(observed: Observed) -> None:
    prom = observed.prom
    expected = {"OutboxEmailDead"}
    wait_until(lambda: expected <= prom.firing(), timeout=30)
    assert not prom.firing() & {
        "OutboxRelayNotRunning",
        "OutboxExporterDown",
        "OutboxLoginCodeLate",
        "OutboxWorkerPoolStalled",
        "OutboxBulkNotDraining",
        # 2 bounces and a complaint in 35 sends: rates far over the limits, on
        # far too little volume to mean anything.
        "OutboxBounceRateHigh",
        "OutboxComplaintRateHigh",
    }
    assert prom.value("max(outbox_bounce_rate_24h)") > 0.02
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    bounce = next(r["expr"] for r in rules if r["alert"] == "OutboxBounceRateHigh")
    assert prom.query(bounce) == []  # the volume, not only the `for:`, keeps it quiet
