"""``outbox web``: the HTTP API, unsubscribe links, bounce webhooks and the console."""

from __future__ import annotations

import argparse

from outbox.cli.output import Done, Printer, Result
from outbox.cli.stop_signals import stop_on_signals
from outbox.config import Settings
from outbox.telemetry.listen_ports import ensure_free
from outbox.telemetry.metrics_server import metrics_registry
from outbox.telemetry.setup import setup_tracing
from outbox.web.server import serve


def web(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    setup_tracing("outbox-web")
    ensure_free(args.host, args.port, "PORT (or --port)")
    if not settings.metrics_auth:
        serve(settings, args.host, args.port, stop_on_signals())
        return Done()
    # One port per app on Heroku-like hosts: the exporter rides along at /metrics
    # (the database's figures; the pace per receiver, read from Redis, stays with
    # `outbox metrics`).
    registry, collector = metrics_registry(settings.database_url)
    try:
        serve(settings, args.host, args.port, stop_on_signals(), registry)
    finally:
        collector.close()
    return Done()
