"""``outbox metrics``: the Prometheus exporter of the outbox_* metrics."""

from __future__ import annotations

import argparse
import os

from outbox.cli.output import Done, Printer, Result
from outbox.cli.stop_signals import stop_on_signals
from outbox.config import Settings
from outbox.events.hook_metrics import WebhookCollector
from outbox.pacing.gauges import PaceCollector
from outbox.pacing.pacer import pacer_for
from outbox.telemetry.listen_ports import ensure_free
from outbox.telemetry.metrics_server import serve


def metrics(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    # PORT is the platform's (Heroku-like hosts), not an Outbox setting.
    port = args.port or int(os.environ.get("PORT") or settings.metrics_port)
    named = "--port" if args.port else "PORT" if os.environ.get("PORT") else "OUTBOX_METRICS_PORT"
    ensure_free(settings.metrics_host, port, named)
    pacer = pacer_for(settings)  # pace figures only where a rate is configured
    serve(
        settings.database_url,
        host=settings.metrics_host,
        port=port,
        stop=stop_on_signals(),
        extra=[
            *([PaceCollector(pacer)] if pacer else []),
            WebhookCollector(settings.database_url),
        ],
        liveness_of=settings,
    )
    return Done()
