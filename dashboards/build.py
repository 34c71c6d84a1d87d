"""Grafana dashboards for Outbox, as code: ``python dashboards/build.py`` writes the JSON.

The JSON files beside this script are generated; a test fails when they
differ from what this code builds, and another runs every panel's query
against a real Prometheus. The datasource is a variable (any Prometheus the
Grafana knows; the provisioned one by default), and so are the scrape jobs of
the exporter and of the workers, and the deployment: every selector carries
``deployment=~"$deployment", job=~"$job"`` (or ``$workers_job``), added by
:func:`scoped`, so a dashboard imported next to other jobs, or into another
Grafana, shows its own series only, and two deployments scraped by one
Prometheus under the same job names are never summed together. The
``deployment`` label is a target label the scrape configuration sets
(otel/prometheus/prometheus.yml; on Kubernetes from the pod's labels).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import GraphThresholdsStyleConfig
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import GraphThresholdsStyleMode
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DashboardLinkType,
    DataSourceRef,
    Threshold,
    ThresholdsMode,
    VariableOption,
    VariableRefresh,
)

HERE = Path(__file__).resolve().parent
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
JOB = "outbox"  # the exporter's scrape job (otel/prometheus/prometheus.yml)
DEPLOYMENT = "outbox"  # its targets' deployment label there (OUTBOX_NAMESPACE's default)
WORKERS_JOB = "outbox-workers"  # the Dramatiq metrics of both pools
# The alert thresholds of otel/prometheus/rules.yml, drawn as lines.
LOGIN_CODE_LATE = 60
BOUNCE_RATE_LIMIT = 0.02
COMPLAINT_RATE_LIMIT = 0.001
RATE = "$__rate_interval"
LATENCY = "outbox_enqueue_to_sent_seconds"


@dataclass(frozen=True)
class Q:
    """One query of a panel: PromQL and the legend of its series."""

    expr: str
    legend: str = ""


_SELECTOR = re.compile(r"\b((?:outbox|dramatiq)_[a-z0-9_]+)(?:\{([^}]*)\})?")


def scoped(expr: str) -> str:
    """``expr`` with the dashboard's job variable in every metric selector."""

    def add(match: re.Match[str]) -> str:
        name, labels = match.group(1), match.group(2)
        job = "$workers_job" if name.startswith("dramatiq_") else "$job"
        scope = f'deployment=~"$deployment", job=~"{job}"'
        inner = f"{scope}, {labels}" if labels else scope
        return f"{name}{{{inner}}}"

    return _SELECTOR.sub(add, expr)


def _target(query: Q, ref: str) -> prometheus.Dataquery:
    target = prometheus.Dataquery().expr(scoped(query.expr)).ref_id(ref)
    return target.legend_format(query.legend or "__auto")


def _thresholds(*steps: tuple[float | None, str]) -> dash.ThresholdsConfig:
    config = dash.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE)
    return config.steps([Threshold(value=value, color=color) for value, color in steps])


def graph(
    title: str,
    queries: Sequence[Q],
    *,
    unit: str = "short",
    description: str = "",
    limit: float | None = None,
    width: int = 12,
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .height(8)
        .span(width)
        .fill_opacity(10)
    )
    for index, query in enumerate(queries):
        panel = panel.with_target(_target(query, chr(ord("A") + index)))
    if limit is not None:
        # The alert threshold as a dashed line: above it, the alert fires.
        panel = panel.thresholds(_thresholds((None, "green"), (limit, "red")))
        style = GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.DASHED)
        panel = panel.thresholds_style(style)
    return panel


def single(
    title: str,
    query: Q,
    *,
    unit: str = "short",
    description: str = "",
    limit: float | None = None,
    width: int = 6,
) -> stat.Panel:
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(4)
        .span(width)
        .with_target(_target(query, "A"))
    )
    if limit is not None:
        panel = panel.thresholds(_thresholds((None, "green"), (limit, "red")))
    return panel


def _job_variable(name: str, label: str, metric: str, default: str) -> dash.QueryVariable:
    return (
        dash.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(f'label_values({metric}{{deployment=~"$deployment"}}, job)')
        .refresh(VariableRefresh.ON_DASHBOARD_LOAD)
        .current(VariableOption(text=default, value=default, selected=True))
        .include_all(False)
    )


def _dashboard(uid: str, title: str, description: str) -> dash.Dashboard:
    return (
        dash.Dashboard(title)
        .uid(uid)
        .with_variable(
            dash.DatasourceVariable("datasource")
            .label("Prometheus")
            .type("prometheus")
            .current(VariableOption(text="Prometheus", value="prometheus", selected=True))
        )
        .with_variable(
            dash.QueryVariable("deployment")
            .label("Deployment")
            .datasource(DATASOURCE)
            .query("label_values(outbox_exporter_up, deployment)")
            .refresh(VariableRefresh.ON_DASHBOARD_LOAD)
            .current(VariableOption(text=DEPLOYMENT, value=DEPLOYMENT, selected=True))
            .include_all(False)
        )
        .with_variable(_job_variable("job", "Exporter job", "outbox_exporter_up", JOB))
        .with_variable(
            _job_variable("workers_job", "Workers job", "dramatiq_messages_total", WORKERS_JOB)
        )
        .description(description)
        .tags(["outbox"])
        .editable()
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("browser")
        .tooltip(DashboardCursorSync.CROSSHAIR)
        .link(
            dash.DashboardLink("Outbox")
            .type(DashboardLinkType.DASHBOARDS)
            .tags(["outbox"])
            .as_dropdown(False)
            .include_vars(False)
            .keep_time(True)
        )
    )


def queue() -> dash.Dashboard:
    return (
        _dashboard(
            "outbox-queue",
            "Outbox · Queue health",
            "Is the queue healthy: depth, age of the oldest unsent email, throughput, relay.",
        )
        .with_row(dash.Row("Now"))
        .with_panel(
            single(
                "Oldest unsent · login codes",
                Q('max(outbox_oldest_unsent_age_seconds{priority="high"})'),
                unit="s",
                limit=LOGIN_CODE_LATE,
                description="Pages above 60 s (OutboxLoginCodeLate).",
            )
        )
        .with_panel(
            single(
                "Oldest unsent · bulk",
                Q('max(outbox_oldest_unsent_age_seconds{priority="bulk"})'),
                unit="s",
                description="Old by design while a paced newsletter drains: judged by drain"
                " time (OutboxBulkDrainTooSlow) and by whether it moves (OutboxBulkNotDraining).",
            )
        )
        .with_panel(
            single(
                "Waiting to be sent",
                Q('sum(outbox_emails{status=~"pending|queued|sending"})'),
                description="Rows pending, queued or sending, both priorities.",
            )
        )
        .with_panel(
            single(
                "Parked: failed, dead, held",
                Q('sum(outbox_emails{status=~"failed|dead|held"})'),
                description="`outbox requeue` sends them again.",
            )
        )
        .with_row(dash.Row("Depth"))
        .with_panel(
            graph(
                "Unsent emails by status and priority",
                [Q('sum by (status, priority) (outbox_emails{status=~"pending|queued|sending"})')],
                description="queued + sending stop at OUTBOX_MAX_IN_FLIGHT per priority.",
            )
        )
        .with_panel(
            graph(
                "Parked emails (failed, dead, held)",
                [Q('sum by (status, priority) (outbox_emails{status=~"failed|dead|held"})')],
            )
        )
        .with_panel(
            graph(
                "Oldest unsent email",
                [Q("max by (priority) (outbox_oldest_unsent_age_seconds)", "{{priority}}")],
                unit="s",
                limit=LOGIN_CODE_LATE,
            )
        )
        .with_panel(
            graph(
                "Throughput",
                [
                    Q(
                        f"sum by (priority) (rate(outbox_enqueued_total[{RATE}]))",
                        "enqueued {{priority}}",
                    ),
                    Q(f"sum by (priority) (rate(outbox_sent_total[{RATE}]))", "sent {{priority}}"),
                ],
                unit="ops",
            )
        )
        .with_row(dash.Row("Relay and workers"))
        .with_panel(
            graph(
                "Relay: last publish, oldest due row",
                [
                    Q("max(outbox_relay_last_publish_age_seconds)", "since last publish"),
                    Q(
                        "max by (priority) (outbox_oldest_due_age_seconds)",
                        "oldest due {{priority}}",
                    ),
                ],
                unit="s",
                limit=120,
                description="Both above 2 min: no relay is publishing (OutboxRelayNotRunning).",
            )
        )
        .with_panel(
            graph(
                "Worker messages (Dramatiq)",
                [
                    Q(
                        "sum by (queue_name) (dramatiq_messages_inprogress)",
                        "in progress {{queue_name}}",
                    ),
                    Q(
                        f"sum by (queue_name) (rate(dramatiq_messages_total[{RATE}]))",
                        "done/s {{queue_name}}",
                    ),
                ],
                description="From the worker pools' own endpoints (dramatiq_prom_port).",
            )
        )
        .with_panel(
            graph(
                "Exporter",
                [
                    Q("min(outbox_exporter_up)", "database answered"),
                    Q("max(outbox_exporter_scrape_duration_seconds)", "scrape seconds"),
                ],
            )
        )
    )


def _quantiles(metric: str, priority: str) -> list[Q]:
    return [
        Q(
            f"histogram_quantile({q}, sum by (le) "
            f'(rate({metric}_bucket{{priority="{priority}"}}[{RATE}])))',
            f"p{int(q * 100)}",
        )
        for q in (0.5, 0.95, 0.99)
    ]


def latency() -> dash.Dashboard:
    return (
        _dashboard(
            "outbox-latency",
            "Outbox · Latency",
            "From enqueue to the relay's 2yz, login codes apart from bulk mail.",
        )
        .with_panel(
            graph(
                "Login codes (high): enqueue to sent",
                _quantiles(LATENCY, "high"),
                unit="s",
            )
        )
        .with_panel(
            graph(
                "Bulk: enqueue to sent",
                _quantiles(LATENCY, "bulk"),
                unit="s",
            )
        )
        .with_panel(
            graph(
                "Mean enqueue to sent",
                [
                    Q(
                        f"sum by (priority) (rate({LATENCY}_sum[{RATE}]))"
                        f" / sum by (priority) (rate({LATENCY}_count[{RATE}]))",
                        "{{priority}}",
                    )
                ],
                unit="s",
            )
        )
        .with_panel(
            graph(
                "One attempt (build + SMTP), p95",
                [
                    Q(
                        "histogram_quantile(0.95, sum by (le, priority) "
                        f"(rate(outbox_send_duration_seconds_bucket[{RATE}])))",
                        "{{priority}}",
                    )
                ],
                unit="s",
            )
        )
    )


def outcomes() -> dash.Dashboard:
    return (
        _dashboard(
            "outbox-outcomes",
            "Outbox · Outcomes",
            "What became of the attempts: sent, retried (by reply class), failed, dead.",
        )
        .with_panel(
            graph(
                "Sent, failed, dead per second",
                [
                    Q(f"sum by (priority) (rate(outbox_sent_total[{RATE}]))", "sent {{priority}}"),
                    Q(
                        f"sum by (priority) (rate(outbox_failed_total[{RATE}]))",
                        "failed {{priority}}",
                    ),
                    Q(f"sum by (priority) (rate(outbox_dead_total[{RATE}]))", "dead {{priority}}"),
                ],
                unit="ops",
            )
        )
        .with_panel(
            graph(
                "Retries by reply class",
                [
                    Q(
                        f"sum by (reply_class) (rate(outbox_retries_total[{RATE}]))",
                        "{{reply_class}}",
                    )
                ],
                unit="ops",
                description="4xx, connection, timeout, uncertain (no reply after the data), other.",
            )
        )
        .with_panel(
            single(
                "Sent",
                Q("sum(increase(outbox_sent_total[$__range]))"),
                description="Over the time range shown; counter resets (a restart) are handled.",
            )
        )
        .with_panel(single("Retried", Q("sum(increase(outbox_retries_total[$__range]))")))
        .with_panel(single("Failed (5yz)", Q("sum(increase(outbox_failed_total[$__range]))")))
        .with_panel(
            single(
                "Dead",
                Q("sum(increase(outbox_dead_total[$__range]))"),
                limit=1,
                description="Any new dead email raises OutboxEmailDead.",
            )
        )
    )


def reputation() -> dash.Dashboard:
    return (
        _dashboard(
            "outbox-reputation",
            "Outbox · Reputation",
            "Bounces and complaints over emails sent in the last 24 h, against the alert limits.",
        )
        .with_panel(
            graph(
                "Bounce rate (hard + soft), 24 h",
                [Q("max(outbox_bounce_rate_24h)", "bounce rate")],
                unit="percentunit",
                limit=BOUNCE_RATE_LIMIT,
                description="Alert above 2 % (OutboxBounceRateHigh).",
            )
        )
        .with_panel(
            graph(
                "Complaint rate, 24 h",
                [Q("max(outbox_complaint_rate_24h)", "complaint rate")],
                unit="percentunit",
                limit=COMPLAINT_RATE_LIMIT,
                description="Alert above 0.1 % (OutboxComplaintRateHigh).",
            )
        )
        .with_panel(
            graph(
                "Bounces and complaints received, 24 h",
                [Q("sum by (class) (outbox_bounces_24h)", "{{class}}")],
            )
        )
        .with_panel(
            graph(
                "Sent (24 h) and suppressed addresses",
                [
                    Q("max(outbox_sent_24h)", "sent in 24 h"),
                    Q("max(outbox_suppressed_addresses)", "suppressed addresses"),
                ],
            )
        )
        .with_panel(
            graph(
                "Pace per receiver (share of its configured rate)",
                [Q("max by (receiver) (outbox_pace_factor)", "{{receiver}}")],
                unit="percentunit",
                description=(
                    "With OUTBOX_RATE_LIMITS set: 100 % normally; lower after throttling"
                    " replies, growing back over OUTBOX_PACE_RECOVERY_SECONDS."
                    " Alert below 50 % for 15 minutes (OutboxReceiverThrottling)."
                ),
            )
        )
        .with_panel(
            graph(
                "Configured send rate per receiver",
                [Q("max by (receiver) (outbox_pace_limit_per_second)", "{{receiver}}")],
                unit="reqps",
            )
        )
    )


DASHBOARDS: dict[str, Callable[[], dash.Dashboard]] = {
    "outbox-queue.json": queue,
    "outbox-latency.json": latency,
    "outbox-outcomes.json": outcomes,
    "outbox-reputation.json": reputation,
}


def render(build: Callable[[], dash.Dashboard]) -> str:
    return json.dumps(build().build(), cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else HERE
    for name, build in DASHBOARDS.items():
        (out / name).write_text(render(build), encoding="utf-8")
        print(out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
